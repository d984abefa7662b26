"""Replay keys: equal for requests an upstream cannot tell apart, different for all others."""

import json
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import (
    DEFAULT_VOLATILE_FIELDS,
    SCHEME_VERSION,
    KeyConfig,
    RequestView,
    Stripped,
    canonicalize,
)
from freezeframe.canonicalize.jsonbody import decode_json, encode_json, short_digest
from freezeframe.canonicalize.profiles.openai import CHAT_COMPLETIONS_DROP

type Body = None | bool | str | Decimal | list[Body] | dict[str, Body]

DEFAULTS = KeyConfig()
OPENAI = RequestView(
    method="POST",
    scheme="https",
    host="api.openai.com",
    port=443,
    path="/v1/chat/completions",
    query=(),
    headers=(("Content-Type", "application/json"), ("Authorization", "Bearer sk-test")),
    body=b"",
    content_type="application/json",
)
ANTHROPIC = replace(
    OPENAI,
    host="api.anthropic.com",
    path="/v1/messages",
    headers=(("anthropic-version", "2023-06-01"), ("x-api-key", "sk-ant-test")),
)


def key_of(body: str | bytes, view: RequestView = OPENAI, config: KeyConfig = DEFAULTS) -> str:
    data = body.encode() if isinstance(body, str) else body
    return canonicalize(replace(view, body=data), config).key


# Test values, and the many texts JSON allows for each.

numbers = st.builds(
    lambda coefficient, exponent: Decimal(f"{coefficient}e{exponent}"),
    st.integers(-(10**25), 10**25),
    st.integers(-80, 80),
)
json_values: st.SearchStrategy[Body] = st.recursive(
    st.none() | st.booleans() | st.text(max_size=12) | numbers,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
kept_members = st.dictionaries(
    st.text(max_size=10).filter(
        lambda name: name not in DEFAULT_VOLATILE_FIELDS | CHAT_COMPLETIONS_DROP
    ),
    json_values,
    max_size=5,
)
volatile_members = st.dictionaries(st.sampled_from(sorted(DEFAULT_VOLATILE_FIELDS)), json_values)

_WHITESPACE = st.sampled_from(["", " ", "\n", "\t", " \r\n  "])


def _spell_number(data: st.DataObject, value: Decimal) -> str:
    """Write a number with a drawn decimal point, zero padding, exponent marker and sign."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    coefficient = "".join(map(str, digits)).lstrip("0")
    if not coefficient:
        minus = data.draw(st.sampled_from(["", "-"]))
        return minus + data.draw(st.sampled_from(["0", "0.0", "0e5", "0.000E-3"]))
    padding = data.draw(st.integers(0, 3))
    coefficient += "0" * padding
    exponent -= padding
    if data.draw(st.booleans()):
        point = data.draw(st.integers(1, len(coefficient)))
        fraction = coefficient[point:]
        mantissa = coefficient[:point] + (f".{fraction}" if fraction else "")
        exponent += len(fraction)
    else:
        zeros = data.draw(st.integers(0, 2))
        mantissa = "0." + "0" * zeros + coefficient
        exponent += len(coefficient) + zeros
    minus = "-" if sign else ""
    if exponent == 0 and data.draw(st.booleans()):
        return minus + mantissa
    marker = data.draw(st.sampled_from(["e", "E"]))
    plus = "" if exponent < 0 else data.draw(st.sampled_from(["", "+"]))
    return f"{minus}{mantissa}{marker}{plus}{exponent}"


def spell(data: st.DataObject, value: Body) -> str:
    """Write a value as JSON with drawn member order, whitespace, escapes and number spellings."""
    pad = data.draw(_WHITESPACE)
    match value:
        case None:
            return pad + "null"
        case bool():
            return pad + ("true" if value else "false")
        case Decimal():
            return pad + _spell_number(data, value)
        case str():
            return pad + json.dumps(value, ensure_ascii=data.draw(st.booleans()))
        case list():
            items = ",".join(spell(data, item) + data.draw(_WHITESPACE) for item in value)
            return f"{pad}[{items}{data.draw(_WHITESPACE)}]"
        case dict():
            members = data.draw(st.permutations(list(value.items())))
            written = ",".join(f"{spell(data, name)}:{spell(data, item)}" for name, item in members)
            return f"{pad}{{{written}{data.draw(_WHITESPACE)}}}"


def plain(value: Body) -> str:
    """Write a value as JSON in one fixed way, numbers exactly."""
    match value:
        case Decimal():
            return str(value)
        case list():
            return "[" + ",".join(plain(item) for item in value) + "]"
        case dict():
            return "{" + ",".join(f"{json.dumps(k)}:{plain(v)}" for k, v in value.items()) + "}"
        case _:
            return json.dumps(value)


# Properties.


@given(st.data(), json_values)
def test_key_ignores_member_order_whitespace_escapes_and_number_spelling(
    data: st.DataObject, value: Body
) -> None:
    assert key_of(spell(data, value)) == key_of(spell(data, value))


@given(st.data(), kept_members, volatile_members, volatile_members)
def test_key_ignores_volatile_fields_present_absent_or_changed(
    data: st.DataObject, kept: dict[str, Body], first: dict[str, Body], second: dict[str, Body]
) -> None:
    with_first = canonicalize(replace(OPENAI, body=spell(data, kept | first).encode()))
    with_second = canonicalize(replace(OPENAI, body=spell(data, kept | second).encode()))
    assert with_first.key == with_second.key
    assert [stripped.part for stripped in with_first.stripped] == [
        f"body:$.{name}" for name in sorted(first)
    ]


def _chat(**changes: Body) -> RequestView:
    body: dict[str, Body] = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 2+2?"},
        ],
        "temperature": Decimal("0.2"),
    }
    return replace(OPENAI, body=plain(body | changes).encode())


def _distinct[T](
    values: st.SearchStrategy[T], compared: Callable[[T], object] = lambda value: value
) -> st.SearchStrategy[tuple[T, T]]:
    return st.tuples(values, values).filter(lambda pair: compared(pair[0]) != compared(pair[1]))


KEPT_PARTS: dict[str, tuple[st.SearchStrategy[tuple[Any, Any]], Callable[..., RequestView]]]
KEPT_PARTS = {
    "model": (_distinct(st.text()), lambda model: _chat(model=model)),
    "message content": (
        _distinct(st.text()),
        lambda text: _chat(messages=[{"role": "user", "content": text}]),
    ),
    "temperature": (_distinct(numbers), lambda temperature: _chat(temperature=temperature)),
    "path": (_distinct(st.text()), lambda path: replace(OPENAI, path=path)),
    "method": (_distinct(st.text(), str.upper), lambda method: replace(OPENAI, method=method)),
    "host": (_distinct(st.text(), str.lower), lambda host: replace(OPENAI, host=host)),
    "port": (_distinct(st.integers(1, 65535)), lambda port: replace(OPENAI, port=port)),
    "query value": (
        _distinct(st.text()),
        lambda value: replace(OPENAI, query=(("page", "1"), ("q", value))),
    ),
}


@pytest.mark.parametrize("part", sorted(KEPT_PARTS))
@given(data=st.data())
def test_key_changes_when_a_kept_part_changes(part: str, data: st.DataObject) -> None:
    pairs, view_with = KEPT_PARTS[part]
    first, second = data.draw(pairs)
    assert canonicalize(view_with(first)).key != canonicalize(view_with(second)).key


@given(st.data(), kept_members, volatile_members)
def test_recanonicalizing_the_canonical_body_gives_the_same_key(
    data: st.DataObject, kept: dict[str, Body], volatile: dict[str, Body]
) -> None:
    first = canonicalize(replace(OPENAI, body=spell(data, kept | volatile).encode()))
    form = decode_json(first.form)
    assert isinstance(form, dict)
    again = canonicalize(replace(OPENAI, body=encode_json(form["body"]).encode()))
    assert (again.key, again.form) == (first.key, first.form)


content_types = st.text() | st.sampled_from(
    ["", "application/json", "application/json; charset=utf-8", "application/x+json", "text/plain"]
)
json_like_bytes = st.builds(
    lambda start, middle, end: start + middle + end,
    st.sampled_from([b"", b"{", b'{"a":', b"[", b"\xef\xbb\xbf", b'"\\ud800', b"[1e", b"-"]),
    st.binary(max_size=8),
    st.sampled_from([b"", b"}", b"]", b'"', b"0", b"NaN", b"1e999999999999999999999"]),
)
any_text = st.text(st.characters(categories=["L", "N", "P", "S", "Z", "Cc", "Cs"]), max_size=12)
name_value_pairs = st.lists(st.tuples(any_text, any_text), max_size=3)


@given(
    st.binary() | json_like_bytes,
    content_types,
    any_text,
    any_text,
    name_value_pairs,
    name_value_pairs,
)
def test_canonicalize_never_raises_and_always_writes_utf8_json(
    body: bytes,
    content_type: str,
    word: str,
    path: str,
    query: list[tuple[str, str]],
    headers: list[tuple[str, str]],
) -> None:
    view = RequestView(
        word, word, word, 443, path, tuple(query), tuple(headers), body, content_type
    )
    config = KeyConfig(
        volatile_query=frozenset(name for name, _ in query[:1]),
        key_headers=frozenset(name for name, _ in headers),
    )
    canonical = canonicalize(view, config)
    assert isinstance(json.loads(canonical.form.decode("utf-8")), dict)
    assert len(canonical.key) == 64
    assert canonical.body_kind in {"empty", "json", "form", "multipart", "bytes"}


# Realistic request pairs.

CHAT_BODY = '{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.7}'


@pytest.mark.parametrize(
    "other",
    [
        '{\n  "temperature": 0.70,\n  "messages": [ {"content": "Hi", "role": "user"} ],\n'
        '  "model": "gpt-4o"\n}',
        CHAT_BODY[:-1] + ',"user":"alice","metadata":{"run":"1"}}',
        CHAT_BODY[:-1] + ',"user":"bob","request_id":"req_123","timestamp":1700000000}',
        CHAT_BODY.replace("0.7", "7e-1").replace('"Hi"', '"\\u0048\\u0069"'),
        "\ufeff" + CHAT_BODY,
    ],
)
def test_openai_chat_bodies_that_mean_the_same_share_a_key(other: str) -> None:
    assert key_of(other) == key_of(CHAT_BODY)


@pytest.mark.parametrize(
    "other",
    [
        CHAT_BODY.replace("gpt-4o", "gpt-4o-mini"),
        CHAT_BODY.replace('"Hi"', '"Hi!"'),
        CHAT_BODY.replace("0.7", "0.70000000000000000001"),
        CHAT_BODY[:-1] + ',"stream":true}',
        CHAT_BODY[:-1] + ',"tools":[{"type":"function","function":{"name":"add"}}]}',
        CHAT_BODY.replace('"content":"Hi"', '"content":"Hi","user":"alice"'),
        CHAT_BODY.replace('"content":"Hi"}', '"content":"Hi"},{"role":"user","content":"Hi"}'),
        CHAT_BODY.replace('"role":"user"', '"role":"system"'),
    ],
)
def test_openai_chat_bodies_that_differ_get_different_keys(other: str) -> None:
    assert key_of(other) != key_of(CHAT_BODY)


def test_message_order_matters() -> None:
    user, assistant = '{"role":"user","content":"a"}', '{"role":"assistant","content":"b"}'
    assert key_of(f'{{"messages":[{user},{assistant}]}}') != key_of(
        f'{{"messages":[{assistant},{user}]}}'
    )


MESSAGES_BODY = (
    '{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.",'
    '"messages":[{"role":"user","content":"Hello"}],"metadata":{"user_id":"u-1"}}'
)


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (MESSAGES_BODY.replace("u-1", "u-2"), True),
        (MESSAGES_BODY.replace("1024", "1.024e3"), True),
        (MESSAGES_BODY.replace(',"metadata":{"user_id":"u-1"}', ""), True),
        (MESSAGES_BODY.replace("1024", "1025"), False),
        (MESSAGES_BODY.replace("Be brief.", "Be thorough."), False),
        (MESSAGES_BODY.replace('"Hello"', '[{"type":"text","text":"Hello"}]'), False),
    ],
)
def test_anthropic_messages_bodies(other: str, same: bool) -> None:
    assert (key_of(other, ANTHROPIC) == key_of(MESSAGES_BODY, ANTHROPIC)) is same


def test_anthropic_and_openai_requests_with_the_same_body_differ() -> None:
    assert key_of(MESSAGES_BODY, ANTHROPIC) != key_of(MESSAGES_BODY, OPENAI)


# Bodies that are not JSON, or not there.


def test_invalid_json_claiming_json_is_keyed_by_its_bytes_with_a_warning() -> None:
    body = b'{"model": "gpt-4o",}'
    canonical = canonicalize(replace(OPENAI, body=body))
    assert canonical.body_kind == "bytes"
    assert canonical.warnings == (
        "body claims JSON (application/json) but is not valid JSON at byte 19: "
        "Expecting property name enclosed in double quotes; keyed by its bytes",
    )
    form = json.loads(canonical.form)
    assert form["body"] == {"blake3": blake3(body).hexdigest(), "length": len(body)}
    assert key_of(b'{"model": "gpt-4o",}') != key_of(b'{"model":"gpt-4o",}')


def test_a_structured_json_suffix_claims_json() -> None:
    canonical = canonicalize(replace(OPENAI, body=b"{", content_type="application/problem+json"))
    assert canonical.warnings[0].startswith("body claims JSON (application/problem+json)")


def test_an_empty_body_is_null_and_differs_from_a_json_null_body() -> None:
    empty = canonicalize(replace(OPENAI, method="GET"))
    assert empty.body_kind == "empty"
    assert json.loads(empty.form)["body"] is None
    assert empty.key != key_of(b"null", replace(OPENAI, method="GET"))


def test_a_body_of_unknown_format_is_keyed_by_its_exact_bytes() -> None:
    octets = replace(OPENAI, content_type="application/octet-stream")
    canonical = canonicalize(replace(octets, body=b"a=1&b=2"))
    assert (canonical.body_kind, canonical.warnings) == ("bytes", ())
    assert canonical.key != key_of(b"b=2&a=1", octets)


def test_json_sent_as_text_is_keyed_by_its_bytes() -> None:
    text = replace(OPENAI, content_type="text/plain")
    assert canonicalize(replace(text, body=b'{"a":1}')).body_kind == "bytes"
    assert key_of(b'{"a":1}', text) != key_of(b'{"a": 1}', text)


def test_without_a_content_type_json_is_tried_and_failure_is_silent() -> None:
    untyped = replace(OPENAI, content_type="")
    assert key_of(b'{"a":1}', untyped) == key_of(b'{ "a": 1.0 }', untyped)
    canonical = canonicalize(replace(untyped, body=b"\x89PNG\r\n"))
    assert (canonical.body_kind, canonical.warnings) == ("bytes", ())


def test_volatile_fields_leave_only_the_top_level_of_an_object_body() -> None:
    assert key_of(b'[{"user": "a"}]') != key_of(b'[{"user": "b"}]')
    assert key_of(b'{"input": {"user": "a"}}') != key_of(b'{"input": {"user": "b"}}')


def test_stripped_fields_are_recorded_with_their_rule_and_a_digest_of_their_value() -> None:
    config = KeyConfig(volatile_fields=DEFAULT_VOLATILE_FIELDS | {"seed"})
    body = b'{"model":"m","seed":7,"user":"alice","timestamp":1}'
    canonical = canonicalize(replace(OPENAI, body=body), config)
    assert canonical.stripped == (
        Stripped("body:$.seed", "config-volatile", short_digest(decode_json(b"7"))),
        Stripped("body:$.timestamp", "default-volatile", short_digest(decode_json(b"1"))),
        Stripped("body:$.user", "openai.chat-completions", short_digest("alice")),
    )
    assert key_of(b'{"model":"m","seed":8}', config=config) == canonical.key


# The request line, query and headers.


@pytest.mark.parametrize(
    ("changes", "same"),
    [
        ({"host": "API.OpenAI.COM"}, True),
        ({"method": "post"}, True),
        ({"scheme": "HTTPS"}, True),
        ({"path": "/V1/chat/completions"}, False),
        ({"path": "/v1/chat%2Fcompletions"}, False),
        ({"port": 8443}, False),
        ({"headers": (("Authorization", "Bearer other"), ("User-Agent", "x"))}, True),
    ],
)
def test_request_line_normalization(changes: dict[str, object], same: bool) -> None:
    changed = replace(OPENAI, **changes)  # type: ignore[arg-type]
    assert (key_of(CHAT_BODY, changed) == key_of(CHAT_BODY)) is same


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ((("b", "2"), ("a", "1")), (("a", "1"), ("b", "2")), True),
        ((("a", "2"), ("a", "1")), (("a", "1"), ("a", "2")), True),
        ((("a", "1"),), (("A", "1"),), False),
        ((("a", "1"),), (("a", "1"), ("a", "1")), False),
        ((("a", ""),), (), False),
    ],
)
def test_query_order_does_not_matter_but_names_and_values_do(
    first: tuple[tuple[str, str], ...], second: tuple[tuple[str, str], ...], same: bool
) -> None:
    keys = key_of("", replace(OPENAI, query=first)), key_of("", replace(OPENAI, query=second))
    assert (keys[0] == keys[1]) is same


def test_volatile_query_parameters_are_stripped_and_recorded() -> None:
    config = KeyConfig(volatile_query=frozenset({"ts"}))
    at = replace(OPENAI, query=(("ts", "1700000000"), ("page", "2")))
    canonical = canonicalize(at, config)
    assert canonical.stripped == (
        Stripped("query:ts", "config-volatile", short_digest("1700000000")),
    )
    assert canonical.key == key_of("", replace(OPENAI, query=(("page", "2"),)), config)
    assert canonical.key != key_of("", replace(at, query=(("TS", "1"), ("page", "2"))), config)


def test_only_configured_headers_enter_the_key_whatever_their_name_case() -> None:
    config = KeyConfig(key_headers=frozenset({"X-Tenant"}))
    tenant = replace(OPENAI, headers=(("x-tenant", "a"), *OPENAI.headers))
    other = replace(OPENAI, headers=(("X-TENANT", "b"), *OPENAI.headers))
    assert key_of(CHAT_BODY, tenant, config) != key_of(CHAT_BODY, other, config)
    assert key_of(CHAT_BODY, tenant) == key_of(CHAT_BODY, other)
    assert b'"headers"' not in canonicalize(tenant).form


def test_the_form_and_key_are_exactly_as_specified() -> None:
    view = RequestView(
        method="post",
        scheme="HTTPS",
        host="Example.COM",
        port=8443,
        path="/a%2Fb",
        query=(("b", "2"), ("a", "1"), ("ts", "9")),
        headers=(("X-Key", "v"), ("Accept", "*/*")),
        body='{"b": 1.0, "a": [true, null, "é", 2.50e-1], "user": "u"}'.encode(),
        content_type="application/json; charset=utf-8",
    )
    config = KeyConfig(volatile_query=frozenset({"ts"}), key_headers=frozenset({"x-key"}))
    canonical = canonicalize(view, config)
    assert (
        canonical.form
        == (
            '{"body":{"a":[true,null,"é",0.25],"b":1},"body_kind":"json",'
            '"headers":[["x-key","v"]],"host":"example.com","method":"POST","path":"/a%2Fb",'
            '"port":8443,"query":[["a","1"],["b","2"]],"scheme":"https","v":3}'
        ).encode()
    )
    assert (canonical.profile, canonical.stripped[0].rule) == ("generic.json", "default-volatile")
    domain = b"freezeframe/key/v%d\n" % SCHEME_VERSION
    assert canonical.key == blake3(domain + canonical.form).hexdigest()
    assert canonicalize(view, config) == canonical
