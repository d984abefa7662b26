"""Miss reports: what differs between a live request and recorded ones, and which is closest."""

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import (
    SCHEME_VERSION,
    Difference,
    KeyConfig,
    RequestView,
    canonicalize,
    differences,
    nearest,
)
from freezeframe.canonicalize.jsonbody import MAX_DEPTH

DEFAULTS = KeyConfig()
CHAT = RequestView(
    method="POST",
    scheme="https",
    host="api.openai.com",
    port=443,
    path="/v1/chat/completions",
    query=(),
    headers=(),
    body=b"",
    content_type="application/json",
)


def form_of(body: object, view: RequestView = CHAT, config: KeyConfig = DEFAULTS) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return canonicalize(replace(view, body=data), config).form


def chat(prompt: str, **extra: object) -> dict[str, object]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": prompt}], **extra}


def test_a_changed_prompt_is_reported_at_its_path_with_both_values() -> None:
    found = differences(form_of(chat("What is 2+2?")), form_of(chat("What is 3+3?")))
    assert found == [Difference("$.messages[0].content", '"What is 2+2?"', '"What is 3+3?"')]


def test_identical_forms_have_no_differences() -> None:
    assert differences(form_of(chat("Hi")), form_of(chat("Hi"))) == []


def test_long_values_are_abridged_to_eighty_characters_with_their_length() -> None:
    long_prompt = "x" * 500
    [found] = differences(form_of(chat(long_prompt)), form_of(chat("short")))
    assert found.recorded == '"short"'
    assert len(found.live) == 80
    assert found.live.startswith('"xxx')
    assert found.live.endswith("… (502 chars)")


def test_the_request_line_query_and_headers_are_reported_by_name() -> None:
    config = KeyConfig(key_headers=frozenset({"anthropic-version"}))
    live = replace(
        CHAT,
        method="PUT",
        host="eu.api.openai.com",
        port=8443,
        path="/v2",
        query=(("page", "2"), ("tag", "a"), ("tag", "b")),
        headers=(("anthropic-version", "2024-01-01"),),
    )
    recorded = replace(CHAT, query=(("page", "1"), ("q", "x")))
    assert differences(form_of(b"", live, config), form_of(b"", recorded, config)) == [
        Difference("method", '"PUT"', '"POST"'),
        Difference("url.host", '"eu.api.openai.com"', '"api.openai.com"'),
        Difference("url.port", "8443", "443"),
        Difference("url.path", '"/v2"', '"/v1/chat/completions"'),
        Difference("query.page", '"2"', '"1"'),
        Difference("query.q", "(absent)", '"x"'),
        Difference("query.tag", '["a","b"]', "(absent)"),
        Difference("header.anthropic-version", '"2024-01-01"', "(absent)"),
    ]


def test_json_bodies_are_walked_to_the_highest_differing_path() -> None:
    live = {"a": {"b": 1}, "kept": [1, 2, 3], "flag": True, "weird key": 1, "n": 1.5}
    recorded = {"a": [1], "kept": [1, 5], "flag": 1, "extra": None, "weird key": 2, "n": 1.50}
    assert differences(form_of(live), form_of(recorded)) == [
        Difference("$.a", '{"b":1}', "[1]"),
        Difference("$.extra", "(absent)", "null"),
        Difference("$.flag", "true", "1"),
        Difference("$.kept[1]", "2", "5"),
        Difference("$.kept[2]", "3", "(absent)"),
        Difference('$["weird key"]', "1", "2"),
    ]


def test_bodies_not_keyed_by_parts_differ_as_one_body_entry() -> None:
    text = replace(CHAT, content_type="text/plain")
    [found] = differences(form_of(b"a=1", text), form_of(b"a=22", text))
    assert found.path == "body"
    assert found.live.startswith("3 bytes, blake3 ")
    assert found.recorded.startswith("4 bytes, blake3 ")
    [found] = differences(form_of(b""), form_of({"a": 1}))
    assert found == Difference("body", "(empty)", '{"a":1}')


def test_form_bodies_are_compared_field_by_field() -> None:
    form = replace(CHAT, content_type="application/x-www-form-urlencoded")
    assert differences(form_of(b"a=1&b=x&c=3", form), form_of(b"c=3&a=22", form)) == [
        Difference("form.a", '"1"', '"22"'),
        Difference("form.b", '"x"', "(absent)"),
    ]


def test_multipart_bodies_are_compared_part_by_part() -> None:
    multipart = replace(CHAT, content_type="multipart/form-data; boundary=xyz")

    def upload(model: str) -> bytes:
        return (
            b'--xyz\r\nContent-Disposition: form-data; name="model"\r\n\r\n'
            + model.encode()
            + b'\r\n--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            b"\r\nRIFF\r\n--xyz--\r\n"
        )

    assert differences(
        form_of(upload("whisper-1"), multipart), form_of(upload("x"), multipart)
    ) == [Difference("part.model", '{"value":"whisper-1"}', '{"value":"x"}')]


def test_a_long_report_is_capped_at_fifty_with_a_count_of_the_rest() -> None:
    live = {f"field{index:02}": index for index in range(60)}
    found = differences(form_of(live), form_of({}))
    assert len(found) == 51
    assert found[-1] == Difference("…", "10 more", "")


def test_bodies_nested_to_the_limit_are_still_walked() -> None:
    def nested(leaf: int) -> bytes:
        return b"[" * (MAX_DEPTH - 1) + b"[%d]" % leaf + b"]" * (MAX_DEPTH - 1)

    [found] = differences(form_of(nested(1)), form_of(nested(2)))
    assert found.path == "$" + "[0]" * MAX_DEPTH
    assert (found.live, found.recorded) == ("1", "2")


def test_an_unreadable_form_compares_as_empty_instead_of_failing() -> None:
    found = differences(form_of(chat("Hi")), b"\xff not a form")
    assert {difference.recorded for difference in found} == {"(absent)"}
    assert found[0] == Difference("v", str(SCHEME_VERSION), "(absent)")


@given(st.binary(), st.binary())
def test_differences_never_raise_on_any_bytes(first: bytes, second: bytes) -> None:
    differences(first, second)


def test_nearest_ranks_the_closest_recording_first() -> None:
    live = form_of(chat("What is 2+2?", temperature=0.2))
    candidates = [
        ("other path", form_of(chat("Hi"), replace(CHAT, path="/v1/embeddings"))),
        ("other prompt", form_of(chat("What is 3+3?", temperature=0.2))),
        ("other temperature", form_of(chat("What is 2+2?", temperature=0.3))),
        ("identical", live),
    ]
    ranked = nearest(live, candidates)
    assert [name for name, _ in ranked] == ["identical", "other temperature", "other prompt"]
    assert ranked[0][1] == []
    assert ranked[2][1] == [Difference("$.messages[0].content", '"What is 2+2?"', '"What is 3+3?"')]


def test_nearest_offers_the_same_endpoint_first_and_never_an_unrelated_one() -> None:
    """Another endpoint with the same body differs in two paths (host, path); the same
    endpoint whose body differs in three nested ids still ranks first, and the other
    endpoint is not offered at all."""
    body = {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "ok", "id": "a"}]}
    live = form_of(body)
    elsewhere = form_of(body, replace(CHAT, host="tools.example", path="/tool/counter"))
    nested = json.loads(json.dumps(body))
    nested["messages"][0].update(tool_call_id="call_2", id="b", content="ok!")
    ranked = nearest(live, [("elsewhere", elsewhere), ("same endpoint", form_of(nested))])
    assert [name for name, _ in ranked] == ["same endpoint"]


def test_nearest_keeps_input_order_on_ties_and_honours_the_limit() -> None:
    live = form_of(chat("a"))
    candidates = [(name, form_of(chat(name))) for name in ["b", "c", "d"]]
    assert [name for name, _ in nearest(live, candidates, limit=2)] == ["b", "c"]
    assert nearest(live, candidates, limit=0) == []
    assert nearest(live, []) == []


def test_nearest_ranks_by_the_full_count_not_the_capped_report() -> None:
    live = form_of({})
    many = form_of({f"f{index}": index for index in range(80)})
    fewer = form_of({f"f{index}": index for index in range(60)})
    ranked = nearest(live, [("many", many), ("fewer", fewer)])
    assert [name for name, _ in ranked] == ["fewer", "many"]
    assert ranked[0][1][-1] == Difference("…", "10 more", "")


def test_long_prompts_are_shown_around_where_they_differ() -> None:
    shared = "You are a careful assistant. " * 20
    [found] = differences(
        form_of(chat(shared + "Answer in French.")), form_of(chat(shared + "Answer in German."))
    )
    assert found.path == "$.messages[0].content"
    assert "French" in found.live and "German" in found.recorded
    assert found.live.startswith("…") and len(found.live) <= 80 and len(found.recorded) <= 80
