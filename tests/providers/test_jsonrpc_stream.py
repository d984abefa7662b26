"""Editing the JSON-RPC response inside an MCP server's SSE answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from freezeframe.providers.jsonrpc_stream import NotJsonRpcStream, edit_response_event

PROGRESS = (
    b'event: message\nid: ev-1\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n'
)
ANSWER = (
    b'event: message\r\nid: ev-2\r\ndata: {"jsonrpc":"2.0","id":7,\r\n'
    b'data: "result":{"n":1}}\r\n\r\n'
)


def bump(message: dict[str, Any]) -> dict[str, Any]:
    return message | {"result": {"n": 2}}


def test_the_response_event_is_rewritten_and_the_rest_kept_byte_for_byte() -> None:
    frames = edit_response_event(PROGRESS + ANSWER, bump)
    assert frames[0] == PROGRESS
    assert frames[1].startswith(b"event: message\r\nid: ev-2\r\ndata: ")
    assert frames[1].endswith(b"\r\n\r\n")
    data = frames[1].split(b"data: ", 1)[1]
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 7, "result": {"n": 2}}


def test_a_stream_without_a_response_is_refused() -> None:
    with pytest.raises(NotJsonRpcStream, match="no JSON-RPC response"):
        edit_response_event(PROGRESS, bump)
