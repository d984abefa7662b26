"""The JSON path subset rules are written in: what each form selects, and what it refuses."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize.jsonbody import JsonValue, decode_json
from freezeframe.canonicalize.jsonpath import BadPath, Location, parse_path, render

DOCUMENT = decode_json(
    b'{"model": "m", "messages": [{"role": "user", "content": "a", "name": "bob"},'
    b' {"role": "assistant", "content": [{"type": "text", "text": "b"}]}],'
    b' "a b": {"name": "x"}, "params": {"_meta": {"traceparent": "t"}}}'
)


@pytest.mark.parametrize(
    ("path", "locations"),
    [
        ("$", [()]),
        ("$.model", [("model",)]),
        ('$["model"]', [("model",)]),
        ('$["a b"].name', [("a b", "name")]),
        ("$.params._meta", [("params", "_meta")]),
        ("$.messages[1].role", [("messages", 1, "role")]),
        ("$.messages[-1].role", [("messages", 1, "role")]),
        ("$.messages[2]", []),
        ("$.messages[-3]", []),
        ("$.messages[*].content", [("messages", 0, "content"), ("messages", 1, "content")]),
        ("$.messages.*.name", [("messages", 0, "name")]),
        ("$.model.name", []),
        ("$.model[0]", []),
        ("$..name", [("messages", 0, "name"), ("a b", "name")]),
        ("$..text", [("messages", 1, "content", 0, "text")]),
        ("$..[0].type", [("messages", 1, "content", 0, "type")]),
        ('$..["traceparent"]', [("params", "_meta", "traceparent")]),
        ("$..content..text", [("messages", 1, "content", 0, "text")]),
    ],
)
def test_paths_select_places_in_document_order(path: str, locations: list[Location]) -> None:
    assert [location for location, _ in parse_path(path).find(DOCUMENT)] == locations


def test_recursive_descent_over_everything_selects_each_place_once() -> None:
    found = [location for location, _ in parse_path("$..*").find(DOCUMENT)]
    assert len(found) == len(set(found)) == 17
    assert found[0] == ("model",)
    doubled = [location for location, _ in parse_path("$..*..*").find(DOCUMENT)]
    assert len(doubled) == len(set(doubled))


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("model", "must start with '$'"),
        ("$model", "expected '.', '..' or '[' at character 2"),
        ("$.", "expected a name, '*' or [\"quoted name\"] at character 3"),
        ("$.a-b", "expected '.', '..' or '[' at character 4"),
        ("$[name]", 'expected [*], [number] or ["quoted name"] at character 2'),
        ('$["a"', "expected ']' after the quoted name at character 6"),
        ('$["a', "unterminated or invalid quoted name at character 3"),
        ("$[1.5]", 'expected [*], [number] or ["quoted name"] at character 2'),
        ("$...a", "expected a name"),
    ],
)
def test_bad_paths_are_refused_with_the_character(path: str, error: str) -> None:
    with pytest.raises(BadPath) as raised:
        parse_path(path)
    assert str(raised.value).startswith(f"JSON path {path!r}")
    assert error in str(raised.value)


locations = st.lists(st.text(max_size=5) | st.integers(0, 5), max_size=5).map(tuple)


@given(locations)
def test_a_rendered_location_parses_back_to_itself(location: Location) -> None:
    value: JsonValue = "leaf"
    for key in reversed(location):
        value = {key: value} if isinstance(key, str) else [None] * key + [value]
    assert parse_path(render(location)).find(value) == [(location, "leaf")]
