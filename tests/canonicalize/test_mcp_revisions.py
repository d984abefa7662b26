"""Keys of MCP requests as the 2025-11-25 and 2026-07-28 revisions send them.

The same request sent twice by two runs (new JSON-RPC ids, sessions, trace context, client
versions, resumption points) keys alike; a changed argument, tool, capability or protocol
version keys apart.
"""

from __future__ import annotations

import json
from typing import Any

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize

CONFIG = KeyConfig()


def stateless_call(
    request_id: Any,
    *,
    region: str = "us-west1",
    client_version: str = "2.3.0",
    traceparent: str | None = None,
    capabilities: dict[str, Any] | None = None,
    version: str = "2026-07-28",
    mirrored: bool = True,
) -> str:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": client_version},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    if traceparent:
        meta["traceparent"] = traceparent
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "execute_sql",
            "arguments": {"region": region, "query": "SELECT 1"},
            "_meta": meta,
        },
    }
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", version),
    ]
    if mirrored:
        headers += [
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "execute_sql"),
            ("Mcp-Param-Region", region),
        ]
    return _key("POST", headers, json.dumps(body).encode())


def session_call(request_id: Any, session: str, *, query: str = "SELECT 1") -> str:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "execute_sql", "arguments": {"region": "us-west1", "query": query}},
    }
    headers = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Session-Id", session),
    ]
    return _key("POST", headers, json.dumps(body).encode())


def resumed_stream(session: str, last_event: str | None) -> str:
    headers = [("Accept", "text/event-stream"), ("Mcp-Session-Id", session)]
    if last_event is not None:
        headers.append(("Last-Event-ID", last_event))
    return _key("GET", headers, b"")


def _key(method: str, headers: list[tuple[str, str]], body: bytes) -> str:
    view = RequestView.of(method, "https", "mcp.example.com", 443, "/mcp", headers, body)
    return canonicalize(view, CONFIG).key


def test_a_stateless_call_keys_alike_across_runs() -> None:
    first = stateless_call(1)
    assert stateless_call("7f3c-uuid", client_version="2.4.0", traceparent="00-ab-cd-01") == first


def test_a_stateless_call_keys_apart_for_what_changes_its_answer() -> None:
    first = stateless_call(1)
    assert stateless_call(1, region="eu-west4") != first, "an argument"
    assert stateless_call(1, capabilities={"elicitation": {}}) != first, "the client's abilities"
    assert stateless_call(1, version="2026-12-01") != first, "the protocol version"
    assert stateless_call(1, mirrored=False) != first, "a call the server refuses for it"


def test_a_2025_11_25_call_keys_alike_across_sessions_and_apart_when_it_changes() -> None:
    first = session_call(3, "a81b-session")
    assert session_call(9, "ffe0-another-session") == first
    assert session_call(3, "a81b-session", query="SELECT 2") != first


def test_a_resumed_stream_keys_as_the_stream_it_resumes() -> None:
    assert resumed_stream("a81b", "evt-41") == resumed_stream("ffe0", "evt-977")
    assert resumed_stream("a81b", None) == resumed_stream("a81b", "evt-41")
