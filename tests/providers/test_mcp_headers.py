"""Mirrored MCP headers follow a changed body, encoded as the 2026-07-28 revision says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freezeframe.providers.mcp_headers import MirrorError, decode_value, encode_value, mirror


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


HEADERS = [
    (b"Content-Type", b"application/json"),
    (b"MCP-Protocol-Version", b"2026-07-28"),
    (b"Mcp-Method", b"tools/call"),
    (b"Mcp-Name", b"execute_sql"),
    (b"Mcp-Param-Region", b"us-west1"),
]


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        (42, "42"),
        (True, "true"),
    ],
)
def test_values_encode_as_the_revision_s_examples(value: Any, header: str) -> None:
    assert encode_value(value) == header
    assert decode_value(header) == (value if isinstance(value, str) else header)


def test_the_mirrored_headers_follow_the_changed_body() -> None:
    before = call("execute_sql", {"region": "us-west1", "query": "SELECT 1"})
    after = call("run_sql", {"region": "Zürich", "query": "SELECT 1"})
    assert mirror(HEADERS, before, after) == [
        (b"Content-Type", b"application/json"),
        (b"MCP-Protocol-Version", b"2026-07-28"),
        (b"Mcp-Method", b"tools/call"),
        (b"Mcp-Name", b"run_sql"),
        (b"Mcp-Param-Region", b"=?base64?WsO8cmljaA==?="),
    ]
    gone = call("execute_sql", {"query": "SELECT 1"})
    assert (b"Mcp-Param-Region", b"us-west1") not in mirror(HEADERS, before, gone)
    assert not any(n == b"Mcp-Param-Region" for n, _ in mirror(HEADERS, before, gone))


def test_an_older_request_gains_no_headers() -> None:
    plain = [(b"Content-Type", b"application/json"), (b"Mcp-Session-Id", b"s-1")]
    before = call("execute_sql", {"region": "us-west1"})
    assert mirror(plain, before, call("other", {"region": "x"})) == plain


def test_a_header_that_cannot_be_traced_to_one_argument_is_said() -> None:
    before = call("copy", {"source": "us-west1", "target": "us-west1"})
    after = call("copy", {"source": "eu", "target": "us-west1"})
    with pytest.raises(MirrorError, match="Mcp-Param-Region: 2 arguments of the recorded call"):
        mirror(HEADERS, before, after)
    named = [(b"Mcp-Param-Target", b"us-west1")]
    assert mirror(named, before, after) == [(b"Mcp-Param-Target", b"us-west1")]


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["method", "params", "name", "arguments", "uri"]), inner
            )
        ),
        max_leaves=10,
    ),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=8),
        lambda inner: st.dictionaries(
            st.sampled_from(["method", "params", "arguments", "region", "name", "_meta"]), inner
        ),
        max_leaves=6,
    ),
)
def test_any_bodies_mirror_or_say_why(before: Any, after: Any) -> None:
    try:
        headers = mirror(HEADERS, before, after)
    except MirrorError as exc:
        assert str(exc).startswith("Mcp-Param-Region: ")
        return
    assert all(value.isascii() for _, value in headers)
