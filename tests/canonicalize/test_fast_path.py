"""The fast path (C parser and encoder) gives the exact path's forms and keys, byte for byte.

The reference here is the code the fast path replaced, kept verbatim: every number read as a
`Number` token, the depth measured by walking every value, and the hand-written encoder. A
canonical form is what keys are hashed from, so not one byte may differ.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from unittest.mock import patch

import pytest
from blake3 import blake3
from hypothesis import example, given, settings
from hypothesis import strategies as st

import freezeframe.canonicalize.body as body_module
import freezeframe.canonicalize.jsonpath as jsonpath_module
import freezeframe.canonicalize.key as key_module
import freezeframe.canonicalize.prune as prune_module
from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize, parse_rules
from freezeframe.canonicalize.jsonbody import (
    _LONE_SURROGATE,
    MAX_DEPTH,
    JsonValue,
    NotJson,
    Number,
    _number,
    _reject_constant,
    decode_json,
    encode_json,
    encode_json_utf8,
    read_json,
    short_digest,
)

# -- the exact path, as it was before the fast path ------------------------------------------


def reference_decode(data: bytes, max_depth: int = MAX_DEPTH) -> JsonValue:
    offset = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = data[offset:].decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotJson(f"is not valid UTF-8 at byte {offset + error.start}") from None
    try:
        value: JsonValue = json.loads(
            text, parse_int=_number, parse_float=_number, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        at = offset + len(text[: error.pos].encode())
        raise NotJson(f"is not valid JSON at byte {at}: {error.msg}") from None
    except RecursionError:
        raise NotJson(f"nests deeper than {max_depth} levels") from None
    except ArithmeticError:  # decimal.InvalidOperation
        raise NotJson("holds a number whose exponent is out of range") from None
    if reference_nests_deeper_than(max_depth, value):
        raise NotJson(f"nests deeper than {max_depth} levels")
    return value


def reference_nests_deeper_than(max_depth: int, value: JsonValue) -> bool:
    pending: list[tuple[JsonValue, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, dict | list):
            continue
        if depth == max_depth:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children)
    return False


def reference_encode(value: JsonValue) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "true" if value else "false"
        case int():
            return str(value)
        case Number(token=token):
            return token
        case str():
            return reference_string(value)
        case list():
            return "[" + ",".join(reference_encode(item) for item in value) + "]"
        case dict():
            members = sorted(value.items(), key=lambda member: member[0])
            pairs = (f"{reference_string(k)}:{reference_encode(v)}" for k, v in members)
            return "{" + ",".join(pairs) + "}"
    raise AssertionError(f"not a value the exact path reads: {value!r}")


def reference_string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)


def reference_utf8(value: JsonValue) -> bytes:
    return reference_encode(value).encode()


def reference_digest(value: JsonValue) -> str:
    return blake3(reference_encode(value).encode()).hexdigest()[:16]


def read_both(data: bytes) -> tuple[object, object]:
    """What each path makes of the bytes: the form's bytes, or the refusal's message."""
    try:
        expected: object = reference_encode(reference_decode(data)).encode()
    except NotJson as refused:
        expected = f"NotJson: {refused}"
    try:
        value = read_json(data)
    except NotJson as refused:
        return expected, f"NotJson: {refused}"
    fast = encode_json_utf8(value)
    assert encode_json(value).encode() == fast
    assert short_digest(value) == blake3(fast).hexdigest()[:16]
    return expected, fast


@contextmanager
def exact_path() -> Iterator[None]:
    """Run `canonicalize` on the reference reader and encoder, as it ran before."""
    with (
        patch.object(body_module, "read_json", reference_decode),
        patch.object(key_module, "encode_json_utf8", reference_utf8),
        patch.object(key_module, "encode_json", reference_encode),
        patch.object(key_module, "short_digest", reference_digest),
        patch.object(prune_module, "short_digest", reference_digest),
        patch.object(jsonpath_module, "encode_json", reference_encode),
    ):
        yield


# -- arbitrary JSON text ---------------------------------------------------------------------

_TRICKY_CHARACTERS = [
    '"',
    "\\",
    "/",
    "\x00",
    "\x08",
    "\x1f",
    "\x7f",
    "\x85",
    "\n",
    "\r",
    "\t",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\ufffe",
    "é",
    "日",
    "😀",
    "\U0010ffff",
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
    "\udc80",
    "[",
    "{",
    "0",
]
_characters = st.one_of(st.characters(), st.sampled_from(_TRICKY_CHARACTERS))
_texts = st.text(_characters, max_size=24)

_NUMBER_TOKENS = [
    "0",
    "-0",
    "0.0",
    "-0.0",
    "1.0",
    "1.5",
    "0.10",
    "2.50",
    "-2.50",
    "1e0",
    "1E+2",
    "10E-1",
    "1e5",
    "1e-7",
    "1e-05",
    "1e16",
    "1e+16",
    "1.5e300",
    "1e308",
    "1e309",
    "1e400",
    "1e-400",
    "5e-324",
    "2.2250738585072014e-308",
    "1.7976931348623157e308",
    "0.1",
    "0.2",
    "0.30000000000000004",
    "0.1000000000000000001",
    "123456789012345678.5",
    "9007199254740993",
    "9007199254740993.0",
    "12e63",
    "1e64",
    "1e65",
    "12.5e100",
    "-1.5e-70",
    "1" + "0" * 64,
    "1" + "0" * 65,
    "-7" + "0" * 80,
    "1" + "0" * 65 + ".0",
    "1" + "0" * 99 + ".0",
    "1" + "0" * 100 + ".0",
    "1" * 120 + ".0",
    "1e99999999999999999999",
    "0e99999999999999999999",
]
_number_tokens = st.one_of(
    st.sampled_from(_NUMBER_TOKENS),
    st.integers().map(str),
    st.integers(-(10**90), 10**90).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)


def _string_token(text: str, ascii_only: bool) -> str:
    """A string as JSON text; lone surrogates can only be written as escapes in UTF-8."""
    return json.dumps(text, ensure_ascii=ascii_only or bool(_LONE_SURROGATE.search(text)))


_string_tokens = st.builds(_string_token, _texts, st.booleans())
_space = st.sampled_from(["", " ", "\n  ", "\t", "\r\n"])


def _array(items: list[str], space: str) -> str:
    return "[" + space + ",".join(f"{item}{space}" for item in items) + "]"


def _object(members: list[tuple[str, str]], space: str) -> str:
    return "{" + ",".join(f"{space}{name}{space}:{space}{value}" for name, value in members) + "}"


_json_texts = st.recursive(
    st.sampled_from(["null", "true", "false"]) | _number_tokens | _string_tokens,
    lambda children: (
        st.builds(_array, st.lists(children, max_size=5), _space)
        | st.builds(_object, st.lists(st.tuples(_string_tokens, children), max_size=5), _space)
    ),
    max_leaves=30,
)


@settings(max_examples=800)
@given(_json_texts, st.booleans())
@example('{"k\\udc80": "\\ud800x", "b": [1.0, 0.5, 1e-7]}', False)
@example('["\\u2028", "\\u0000\\u001f\\u007f", "\\"\\\\/"]', False)
@example(f"[{'1' + '0' * 65}, 2.5]", False)
@example("[1.0, 0.30000000000000004, 1e400, -0.0, 12.5e100]", True)
@example('{"b": 1, "a": 2, "a": 3, "\\u00e9": 4, "e\\u0301": 5, "\\ud83d\\ude00": 6}', False)
def test_any_json_text_reads_and_writes_to_the_exact_bytes(text: str, bom: bool) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    expected, actual = read_both(data)
    assert actual == expected


@given(st.binary(max_size=64))
def test_any_bytes_are_read_or_refused_as_the_exact_path_does(data: bytes) -> None:
    expected, actual = read_both(data)
    assert actual == expected


@pytest.mark.parametrize(
    "data",
    [
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * MAX_DEPTH + b"1" + b"}" * MAX_DEPTH,
        b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
        # Many brackets, all in strings or side by side: shallow.
        json.dumps(["[{" * 400, [[]] * 300, {"x": [{}] * 300}]).encode(),
        # Too deep, and longer than the text whose brackets are counted.
        b"[" * (MAX_DEPTH + 1) + json.dumps("x" * 70_000).encode() + b"]" * (MAX_DEPTH + 1),
        b"[" * MAX_DEPTH + json.dumps("x" * 70_000).encode() + b"]" * MAX_DEPTH,
        b"[1, 2" + b" " * 70_000 + b"]",
        ("[" + "1" * 5000 + "]").encode(),  # past the interpreter's int-to-text limit
        ("[" + "1" * 5000 + ".0, 2]").encode(),
        ("[" + "1" * 5000 + ", 2}").encode(),  # and not JSON either
        b'{"a": NaN}',
        b"[-Infinity, 1.5]",
        b"[1.5, 1e99999999999999999999]",
        b'{"a": "\xff"}',
        b"\xef\xbb\xbf\xc3",
    ],
)
def test_edge_cases_read_and_write_to_the_exact_bytes(data: bytes) -> None:
    expected, actual = read_both(data)
    assert actual == expected


_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | _texts
    | _number_tokens.filter(lambda token: "e999999" not in token).map(_number),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_texts, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=500)
@given(_values)
def test_any_value_is_written_as_the_exact_encoder_writes_it(value: JsonValue) -> None:
    assert encode_json(value) == reference_encode(value)
    assert encode_json_utf8(value) == reference_encode(value).encode()
    assert short_digest(value) == reference_digest(value)


def test_the_exact_reader_still_holds_every_number_as_a_number() -> None:
    value = decode_json(b'[1, 1.0, 0.5, true, {"a": -0}]')
    assert value == [Number("1"), Number("1"), Number("0.5"), True, {"a": Number("0")}]


# -- realistic requests, whole forms and keys ------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """A number token, written into the body as spelled."""

    token: str


def spell(value: object, space: str, ascii_only: bool) -> str:
    """Write a body with chosen whitespace, escaping and number spellings."""
    if isinstance(value, Raw):
        return value.token
    if isinstance(value, str):
        return _string_token(value, ascii_only)
    if isinstance(value, list):
        return _array([spell(item, space, ascii_only) for item in value], space)
    if isinstance(value, dict):
        members = [
            (_string_token(k, ascii_only), spell(v, space, ascii_only)) for k, v in value.items()
        ]
        return _object(members, space)
    return json.dumps(value)


_floats = st.one_of(
    st.sampled_from(["0", "0.0", "0.2", "0.7", "1", "1.0", "1.00", "2e-1", "0.95", "1e-7"]),
    st.floats(0, 2, allow_nan=False).map(repr),
    st.decimals(0, 2, places=3, allow_nan=False).map(str),
).map(Raw)
_ints = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["1e3", "256.0"])).map(Raw)
_big_ints = st.one_of(st.integers().map(str), st.integers(-(2**70), 2**70).map(str)).map(Raw)
_prose = st.text(_characters, max_size=200)
_name = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
_schema = st.fixed_dictionaries(
    {
        "type": st.just("object"),
        "properties": st.dictionaries(
            _name,
            st.fixed_dictionaries(
                {"type": st.sampled_from(["string", "number", "integer"])},
                optional={"description": _prose, "minimum": _big_ints, "default": _floats},
            ),
            max_size=4,
        ),
    },
    optional={"required": st.lists(_name, max_size=3)},
)
_arguments = st.dictionaries(
    _name, st.one_of(_prose, _floats, _big_ints, st.booleans(), st.none()), max_size=4
)

_openai_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": _prose},
    optional={
        "name": _name,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": _name,
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {
                            "name": _name,
                            "arguments": _arguments.map(
                                lambda arguments: spell(arguments, "", False)
                            ),
                        }
                    ),
                }
            ),
            max_size=2,
        ),
    },
)
_openai_body = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["gpt-4o-mini", "gpt-4.1"]),
        "messages": st.lists(_openai_message, min_size=1, max_size=5),
    },
    optional={
        "temperature": _floats,
        "top_p": _floats,
        "max_tokens": _ints,
        "seed": _big_ints,
        "stream": st.booleans(),
        "user": _prose,
        "metadata": st.dictionaries(_name, _prose, max_size=2),
        "logit_bias": st.dictionaries(st.integers(0, 10**5).map(str), _floats, max_size=3),
        "tools": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": _name, "description": _prose, "parameters": _schema}
                    ),
                }
            ),
            max_size=3,
        ),
        "timestamp": _big_ints,
    },
)
_anthropic_block = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": _prose},
        optional={"cache_control": st.just({"type": "ephemeral"})},
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": _name, "name": _name, "input": _arguments}
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": _name, "content": _prose}
    ),
)
_anthropic_body = st.fixed_dictionaries(
    {
        "model": st.just("claude-sonnet-4-5"),
        "max_tokens": _ints,
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant"]),
                    "content": _prose | st.lists(_anthropic_block, min_size=1, max_size=3),
                }
            ),
            min_size=1,
            max_size=4,
        ),
    },
    optional={
        "system": _prose,
        "temperature": _floats,
        "top_k": _ints,
        "metadata": st.fixed_dictionaries({"user_id": _prose}),
        "stop_sequences": st.lists(_prose, max_size=2),
        "tools": st.lists(
            st.fixed_dictionaries({"name": _name, "description": _prose, "input_schema": _schema}),
            max_size=3,
        ),
        "service_tier": st.just("auto"),
    },
)
_mcp_message = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.sampled_from(["tools/call", "tools/list", "ping"])},
    optional={
        "id": st.one_of(_big_ints, _name),
        "params": st.fixed_dictionaries(
            {},
            optional={
                "name": _name,
                "arguments": _arguments,
                "_meta": st.fixed_dictionaries(
                    {}, optional={"progressToken": _big_ints, "traceparent": _prose}
                ),
                "id": _big_ints,
            },
        ),
    },
)
_mcp_body = _mcp_message | st.lists(_mcp_message, min_size=1, max_size=3)

_REQUESTS = {
    "openai": ("api.openai.com", "/v1/chat/completions", _openai_body),
    "anthropic": ("api.anthropic.com", "/v1/messages", _anthropic_body),
    "mcp": ("localhost", "/mcp", _mcp_body),
    "generic": ("example.com", "/api", _arguments),
}

_RULES = parse_rules(
    r"""
[[rule]]
path = "/v1/chat/completions"
ignore = ["$.messages[*].name", "$.tools[*].function.description"]
keep = ["$.metadata.tenant"]
ignore_query = ["ts"]
key_headers = ["X-Tenant-Id"]
[[rule.substitute]]
path = "$.messages[*].content"
pattern = "\\d+"
replacement = "<n>"

[[rule]]
profile = "anthropic.messages"
ignore = ["$..cache_control", "$.top_k"]

[[rule]]
profile = "mcp"
[[rule.substitute]]
pattern = "[aeiou]"
replacement = "_"
"""
)
_CONFIGS = [KeyConfig(), KeyConfig(rules=_RULES, volatile_fields=frozenset({"seed"}))]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(sorted(_REQUESTS)).flatmap(
        lambda kind: st.tuples(st.just(kind), _REQUESTS[kind][2])
    ),
    _space,
    st.booleans(),
    st.sampled_from(_CONFIGS),
    st.lists(st.tuples(st.sampled_from(["ts", "page", "q"]), _prose), max_size=3),
)
def test_realistic_requests_get_the_exact_form_and_key(
    request: tuple[str, object],
    space: str,
    ascii_only: bool,
    config: KeyConfig,
    query: list[tuple[str, str]],
) -> None:
    kind, body = request
    host, path, _ = _REQUESTS[kind]
    view = RequestView(
        method="POST",
        scheme="https",
        host=host,
        port=443,
        path=path,
        query=tuple(query),
        headers=(
            ("Content-Type", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "b,a, c"),
            ("X-Tenant-Id", "t\udc80"),
            ("mcp-protocol-version", "2025-06-18"),
        ),
        body=spell(body, space, ascii_only).encode(),
        content_type="application/json",
    )
    fast = canonicalize(view, config)
    with exact_path():
        exact = canonicalize(view, config)
    assert fast.form == exact.form
    assert fast == exact


_CONVERSATION = [
    {"role": "system", "content": "You are a careful coding agent.\nAnswer tersely."},
    {"role": "user", "content": "Fix the parser — it drops «quoted» text and \\u escapes."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/p.py", "n": 1.0}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "def parse(s):\n\treturn s\u2028"},
]
_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file; returns its lines.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "n": {"type": "number", "minimum": 0}},
            "required": ["path"],
        },
    },
}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/chat/completions",
            b'{"model": "gpt-4o-mini", "messages": %s, "tools": [%s], "temperature": 0.2, '
            b'"top_p": 1.0, "max_tokens": 256, "seed": 12345678901234567890, "user": "u-1", '
            b'"logit_bias": {"50256": -100, "198": 1.5e1}, "stream": false}'
            % (json.dumps(_CONVERSATION).encode(), json.dumps(_TOOL).encode()),
        ),
        (
            "/v1/chat/completions",
            json.dumps(
                {"model": "gpt-4o", "messages": _CONVERSATION * 40, "temperature": 0.7},
                ensure_ascii=False,
            ).encode(),
        ),
        (
            "/v1/messages",
            json.dumps(
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 1024,
                    "temperature": 1,
                    "system": [{"type": "text", "text": "Be brief.", "cache_control": {}}],
                    "messages": [
                        {"role": "user", "content": "日本語で答えて 😀"},
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "text", "text": "Reading."},
                                {
                                    "type": "tool_use",
                                    "id": "toolu_1",
                                    "name": "read_file",
                                    "input": {"path": "a.py", "ratio": 0.75, "limit": 1e3},
                                },
                            ],
                        },
                    ],
                    "metadata": {"user_id": "u-1"},
                }
            ).encode(),
        ),
        (
            "/mcp",
            b'[{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "grep",'
            b' "arguments": {"pattern": "\\\\d+", "max": 2.50}, "_meta": {"progressToken": 1}}},'
            b' {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}]',
        ),
        ("/v1/embeddings", b'{"model": "m", "input": [[1, 2, 3, 1e-7], "x\\ud800"], "user": 1}'),
    ],
)
@pytest.mark.parametrize("config", _CONFIGS)
def test_typical_bodies_get_the_exact_form_and_key(
    path: str, body: bytes, config: KeyConfig
) -> None:
    view = RequestView(
        method="POST",
        scheme="https",
        host="api.example.com",
        port=443,
        path=path,
        query=(("b", "2"), ("a", "1")),
        headers=(("content-type", "application/json"), ("anthropic-beta", "x,y")),
        body=body,
        content_type="application/json",
    )
    fast = canonicalize(view, config)
    assert fast.body_kind == "json"
    with exact_path():
        exact = canonicalize(view, config)
    assert fast.form == exact.form
    assert fast == exact
