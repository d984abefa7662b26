"""MCP messages in recorded traffic: which method, and for ``tools/call`` the call and result.

MCP over streamable HTTP POSTs one JSON-RPC message (or a batch) per request, on whatever
path the server chose, and answers with JSON or with SSE events carrying JSON-RPC messages
(https://modelcontextprotocol.io/specification/2025-06-18/basic/transports). A
``tools/call`` request's ``params`` hold the tool's ``name`` and ``arguments``; its result
holds ``content`` blocks and ``isError``, and a JSON-RPC ``error`` is a failure too
(https://modelcontextprotocol.io/specification/2025-06-18/server/tools). A body-less ``GET``
with MCP's headers opens the session's SSE stream, or resumes one after the event its
``Last-Event-ID`` names (2025-11-25,
https://modelcontextprotocol.io/specification/2025-11-25/basic/transports).
"""

from __future__ import annotations

from dataclasses import dataclass

from freezeframe.canonicalize import sse_events
from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.canonicalize.profiles.mcp import is_json_rpc_request, is_stream_request
from freezeframe.providers.bodies import (
    as_dict,
    as_list,
    as_str,
    header,
    json_text,
    media_type,
    parse_json,
    request_body,
    response_body,
)
from freezeframe.providers.messages import ToolCall, ToolResult, tool_call, tool_result
from freezeframe.providers.parts import TEXT, Part, content_parts
from freezeframe.storage import Exchange

TOOLS_CALL = "tools/call"


@dataclass(frozen=True, slots=True)
class McpMessage:
    """An MCP request as recorded."""

    method: str
    """The JSON-RPC method (``initialize``, ``tools/list``, ``tools/call``...); a batch
    is named by its first message's."""
    call: ToolCall | None
    """For ``tools/call``: the tool's name and arguments, its id the JSON-RPC id."""
    result: ToolResult | None
    """For ``tools/call``: what the server answered, when it answered."""
    session: str | None = None
    """The ``Mcp-Session-Id`` a stream's ``GET`` carried."""
    resumed_after: str | None = None
    """The ``Last-Event-ID`` a resumed stream's ``GET`` carried: the last event the client
    had, after which the server sends the rest."""


STREAM = "stream"
"""The method named for a ``GET`` that opens the session's SSE stream."""
RESUMED = "stream resumed"
"""The method named for a ``GET`` that resumes a stream with ``Last-Event-ID`` (2025-11-25)."""


def mcp_of(exchange: Exchange) -> McpMessage | None:
    """The MCP request of an exchange; None for any other exchange."""
    body = request_body(exchange)
    value = parse_json(body.data) if body.data else None
    if not body.data and _is_stream(exchange):
        session = header(exchange.recorded.request_headers, b"mcp-session-id")
        resumed = header(exchange.recorded.request_headers, b"last-event-id")
        return McpMessage(RESUMED if resumed else STREAM, None, None, session, resumed)
    if not is_json_rpc_request(value):
        return None
    first = as_dict(as_list(value)[0] if isinstance(value, list) else value)
    method = as_str(first.get("method")) or ""
    if method != TOOLS_CALL:
        return McpMessage(method, None, None)
    params = as_dict(first.get("params"))
    request_id = first.get("id")
    call_id = None if request_id is None else json_text(request_id)
    arguments = json_text(params.get("arguments") or {})
    call = tool_call(call_id, as_str(params.get("name")) or "", arguments)
    return McpMessage(method, call, _result(exchange, request_id))


def _is_stream(exchange: Exchange) -> bool:
    headers = [
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in exchange.recorded.request_headers
    ]
    return is_stream_request(exchange.recorded.method, headers)


def _result(exchange: Exchange, request_id: JsonValue) -> ToolResult | None:
    """The JSON-RPC response to ``request_id``, from a JSON body or from SSE events."""
    body = response_body(exchange)
    if body is None or not body.data:
        return None
    if (
        media_type(exchange.recorded.response.headers if exchange.recorded.response else ())
        == "text/event-stream"
    ):
        messages = [parse_json(data) for _, data in sse_events(body.data)]
    else:
        messages = [parse_json(body.data)]
    for message in messages:
        for item in as_list(message) if isinstance(message, list) else [message]:
            answer = as_dict(item)
            if answer.get("id") == request_id and ("result" in answer or "error" in answer):
                return _tool_result(json_text(request_id), answer)
    return None


def _tool_result(call_id: str, answer: dict[str, JsonValue]) -> ToolResult:
    error = as_dict(answer.get("error"))
    if error or "error" in answer:
        text = as_str(error.get("message")) or json_text(answer.get("error"))
        return tool_result(call_id, (Part(TEXT, text),), is_error=True)
    result = as_dict(answer.get("result"))
    failed = result.get("isError") is True
    return tool_result(call_id, content_parts(result.get("content")), is_error=failed)
