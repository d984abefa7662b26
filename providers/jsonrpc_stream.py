"""``edit --set`` on a JSON-RPC answer streamed as server-sent events (MCP's SSE answers).

An MCP server may answer a request with an SSE stream rather than one JSON object: progress
and log notifications first, then the JSON-RPC response to the request, each a ``data:``
event (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports). Editing
such an answer means editing that response message: ``--set '$.result.content[0].text=…'``
names the same paths as on a JSON answer. The response event is written again as one
``data:`` line (its ``event:``, ``id:`` and ``retry:`` fields kept); every other event keeps
its bytes, and each event stays a frame of its own, so the edited stream is paced as
recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from freezeframe.storage import boundedjson

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class NotJsonRpcStream(ValueError):
    """The stream holds no JSON-RPC response to edit; the message says why."""


def edit_response_event(body: bytes, change: Callable[[Any], Any]) -> list[bytes]:
    """The stream's events as frames, the last JSON-RPC response among them replaced by
    ``change`` of it. Raises NotJsonRpcStream."""
    frames: list[bytes] = []
    start = 0
    for end in _EVENT_END.finditer(body):
        frames.append(body[start : end.end()])
        start = end.end()
    if start < len(body):
        frames.append(body[start:])
    for at in range(len(frames) - 1, -1, -1):
        message = _response(frames[at])
        if message is not None:
            frames[at] = _with_data(frames[at], change(message))
            return frames
    raise NotJsonRpcStream("no JSON-RPC response (a result or an error) among its events")


def _response(frame: bytes) -> dict[str, Any] | None:
    data = b"\n".join(_field(line) for line in frame.splitlines() if line.startswith(b"data:"))
    try:
        message = boundedjson.loads(data) if data else None
    except ValueError:
        return None
    if isinstance(message, dict) and ("result" in message or "error" in message):
        return message
    return None


def _field(line: bytes) -> bytes:
    value = line[len(b"data:") :]
    return value[1:] if value.startswith(b" ") else value


def _with_data(frame: bytes, message: Any) -> bytes:
    ending = _EVENT_END.search(frame)
    newline = b"\r\n" if ending is not None and ending.group(0) == b"\r\n\r\n" else b"\n"
    kept = [line for line in frame.splitlines() if line and not line.startswith(b"data:")]
    data = b"data: " + json.dumps(message, ensure_ascii=False).encode("utf-8")
    return newline.join([*kept, data]) + newline + newline
