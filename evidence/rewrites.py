"""The only changes replay makes to recorded bytes, each one named.

Replay is byte-exact but for one rewrite: a JSON-RPC (MCP) answer must carry the ``id`` of
the request it answers, and the live request's ``id`` is not the recorded one (it is not part
of the key). At ``instant`` pace, and only then, a recorded
``retry-after`` would make the client sleep for real (the Anthropic SDK sleeps whatever it
says), which defeats the point of an instant replay; so those headers are set to the
smallest value. ``show``, the admin API and every other reader list these rewrites for
every exchange they would touch, through the same functions replay calls, so a reader of the
evidence knows what the client was and was not shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from freezeframe.storage import Header, RecordedResponse, boundedjson

RETRY_HEADERS = frozenset({b"retry-after", b"retry-after-ms"})
SMALLEST_RETRY = b"0"


@dataclass(frozen=True, slots=True)
class Rewrite:
    header: str
    recorded: str
    replayed: str
    when: str


def instant_rewrites(headers: Sequence[Header]) -> tuple[tuple[Header, ...], tuple[Rewrite, ...]]:
    """The headers as served at ``instant`` pace, and what was changed."""
    rewrites = []
    served = []
    for name, value in headers:
        if name.lower() in RETRY_HEADERS and value != SMALLEST_RETRY:
            rewrites.append(
                Rewrite(
                    header=name.decode("latin-1"),
                    recorded=value.decode("latin-1"),
                    replayed=SMALLEST_RETRY.decode(),
                    when="replay pace instant",
                )
            )
            value = SMALLEST_RETRY
        served.append((name, value))
    return tuple(served), tuple(rewrites)


#: The name of the JSON-RPC id rewrite in logs and annotations.
JSONRPC_ID = "jsonrpc-id"

#: A JSON-RPC answer echoes its request's ``id``; replay answers with the live request's.
JSONRPC_ID_REWRITE = Rewrite(
    header="body: JSON-RPC id",
    recorded="the recorded request's id",
    replayed="the live request's id",
    when="always, for MCP / JSON-RPC requests",
)

_ID_MEMBER = re.compile(rb'"id"\s*:\s*')
_ENCODING = b"content-encoding"


def jsonrpc_rewritable(request_body: bytes, response: RecordedResponse | None) -> bytes | None:
    """The recorded request's JSON-RPC id if replay puts the live id into this answer.

    None when it never does: no JSON-RPC request, no answer, a body kept in the store (too
    large to edit on the way) or content-encoded (its bytes cannot be edited in place), or an
    answer that does not carry the id at its top level.
    """
    if response is None or response.body_ref is not None:
        return None
    if any(name.lower() == _ENCODING for name, _ in response.headers):
        return None
    original = jsonrpc_id(request_body)
    if original is None or not rewrite_jsonrpc_id(response.body, original, original)[1]:
        return None
    return original


def replay_rewrites(request_body: bytes, response: RecordedResponse | None) -> list[Rewrite]:
    """Everything replay may change in this recording's answer, each with when it does."""
    if response is None:
        return []
    found = list(instant_rewrites(response.headers)[1])
    if jsonrpc_rewritable(request_body, response) is not None:
        found.append(JSONRPC_ID_REWRITE)
    return found


def jsonrpc_id(body: bytes) -> bytes | None:
    """The compact JSON token of a JSON-RPC request's ``id``, or None if it has none."""
    try:
        message = boundedjson.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    return json.dumps(message["id"], separators=(",", ":")).encode()


def rewrite_jsonrpc_id(
    body: bytes, recorded: bytes, live: bytes
) -> tuple[bytes, list[tuple[int, int]]]:
    """Replace the top-level ``"id": <recorded>`` of each JSON-RPC message in ``body`` (plain
    JSON, or the ``data:`` lines of an SSE stream) with ``live``, touching no other byte.

    Returns the new body and the edits as (offset in the old body, change in length), so
    recorded chunk offsets can be moved to match.
    """
    edits: list[tuple[int, int]] = []
    out = bytearray()
    done = 0
    for match in _ID_MEMBER.finditer(body):
        value = match.end()
        if body.startswith(recorded, value) and _depth(body, match.start()) == 1:
            following = body[value + len(recorded) : value + len(recorded) + 1]
            if following in (b"", b",", b"}", b" ", b"\n", b"\r", b"\t"):
                out += body[done:value] + live
                done = value + len(recorded)
                edits.append((value, len(live) - len(recorded)))
    out += body[done:]
    return bytes(out), edits


def _depth(body: bytes, position: int) -> int:
    """Object/array nesting at ``position`` within its JSON document (an SSE ``data:`` line
    or the whole body), skipping brackets inside strings."""
    start = body.rfind(b"\n", 0, position) + 1
    if body[start:position].lstrip().startswith(b"data:"):
        start = body.index(b":", start) + 1
    else:
        start = 0
    depth, in_string, escaped = 0, False, False
    for byte in body[start:position]:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):  # { [
            depth += 1
        elif byte in (0x7D, 0x5D):  # } ]
            depth -= 1
    return depth
