"""The one JSON shape of a recorded exchange, for every reader of recordings.

``show --json``, the admin API and the case file print the same document, so a field that one
of them shows is shown by all, with the same name. Bytes become text where they are UTF-8 and
base64 otherwise; a body the store keeps out of memory is named by its digest and size, never
loaded to be printed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from freezeframe.canonicalize.realtime import session_key
from freezeframe.evidence.rewrites import replay_rewrites
from freezeframe.providers.messages import Message as Turn
from freezeframe.providers.realtime import is_realtime, read_session
from freezeframe.storage import (
    BlobRef,
    CassetteSummary,
    Exchange,
    ExchangeSummary,
    Header,
    Message,
    Miss,
    SearchHit,
    TapeRecord,
    boundedjson,
)


def exchange_document(exchange: Exchange) -> dict[str, Any]:
    """Everything the store holds about one exchange, and what replay would change in it."""
    recorded = exchange.recorded
    response = recorded.response
    return {
        "cassette": recorded.cassette,
        "seq": exchange.seq,
        "occurrence": recorded.slot.occurrence,
        "key": recorded.key,
        "key_scheme": recorded.key_scheme,
        "outcome": recorded.outcome.value,
        "error": recorded.error,
        "context": dict(recorded.context),
        "timing": {
            "started_at": recorded.started_at,
            "first_byte_after": response.first_byte_at if response else None,
            "duration": recorded.duration,
        },
        "request": {
            "method": recorded.method,
            "url": exchange.url,
            "http_version": recorded.http_version,
            "headers": headers_document(recorded.request_headers),
            "body": body_document(recorded.request_body, recorded.request_body_ref),
            "canonical": canonical_document(recorded.canonical),
        },
        "response": None
        if response is None
        else {
            "status": response.status,
            "reason": response.reason,
            "http_version": response.http_version,
            "headers": headers_document(response.headers),
            "trailers": headers_document(response.trailers),
            "body": body_document(response.body, response.body_ref),
            "chunks": [[c.offset, round(c.at, 6)] for c in response.chunks],
        },
        "rewrites": [asdict(r) for r in replay_rewrites(recorded.request_body, response)],
        "metadata": dict(recorded.facts),
        "stripped": None if recorded.stripped is None else dict(recorded.stripped),
        "drift": [
            {"at": d.at, "paths": list(d.paths), "context": dict(d.context)} for d in exchange.drift
        ],
        "messages": None
        if recorded.messages is None
        else [message_document(m) for m in recorded.messages],
        "session": session_document(exchange),
        "origin": None if recorded.origin is None else asdict(recorded.origin),
        "chain": exchange.chain,
    }


def session_document(exchange: Exchange) -> dict[str, Any] | None:
    """A WebSocket's session: the key of the client's messages (canonicalize.realtime),
    and for an OpenAI Realtime session its transcript, turn by turn, the last response
    last. None for an exchange that is no WebSocket."""
    if exchange.recorded.messages is None:
        return None
    clients = [(m.text, m.data) for m in exchange.recorded.messages if m.from_client]
    document: dict[str, Any] = {"key": session_key(clients), "transcript": None}
    if is_realtime(exchange):
        session = read_session(exchange)
        turns = [_turn(m) for m in session.messages]
        if session.answer is not None:
            answer = session.answer
            calls = [{"name": c.name, "arguments": c.arguments} for c in answer.tool_calls]
            turns.append({"role": "assistant", "text": answer.text, "tool_calls": calls})
        document |= {"model": session.model, "system": session.system, "transcript": turns}
    return document


def _turn(message: Turn) -> dict[str, Any]:
    text = message.text or "\n".join(r.text for r in message.tool_results)
    calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    return {"role": message.role, "text": text, "tool_calls": calls}


def summary_document(summary: ExchangeSummary) -> dict[str, Any]:
    """One line of a cassette's listing (``show CASSETTE --json``, the admin API)."""
    return asdict(summary)


def cassette_document(summary: CassetteSummary) -> dict[str, Any]:
    """One line of the cassette list (``ls --json``, the admin API)."""
    return asdict(summary)


def headers_document(fields: Sequence[Header]) -> list[list[str]]:
    return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in fields]


def canonical_document(form: bytes) -> object:
    """A canonical form as the JSON it is, or as its text where it is not JSON: the proxy
    always writes JSON, but a store filled by other means (a benchmark's synthetic forms, an
    import whose file carries its own) holds what it was given, and must still be shown."""
    try:
        return boundedjson.loads(form)
    except ValueError:  # not JSON, not UTF-8, or nested too deep
        return form.decode("utf-8", "backslashreplace")


def body_document(data: bytes, ref: BlobRef | None = None) -> dict[str, Any]:
    """A body as text, as base64, or (kept in the store) as its digest and size."""
    if ref is not None:
        return {"bytes": ref.size, "blake3": ref.digest, "omitted": "larger than shown inline"}
    try:
        return {"text": data.decode("utf-8"), "bytes": len(data)}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii"), "bytes": len(data)}


def message_document(message: Message) -> dict[str, Any]:
    """One WebSocket message: who sent it, when, and its payload as text or base64."""
    document: dict[str, Any] = {
        "from": "client" if message.from_client else "server",
        "type": "text" if message.text else "binary",
        "at": round(message.at, 6),
    }
    return document | body_document(message.data)


def miss_document(miss: Miss) -> dict[str, Any]:
    """A kept replay miss (``show CASSETTE --misses --json``, the admin API)."""
    return asdict(miss)


def search_document(hit: SearchHit) -> dict[str, Any]:
    """One search hit (``search --json``, the admin API)."""
    return asdict(hit)


def tape_document(kept: TapeRecord | None) -> dict[str, Any] | None:
    """``show --unused --json``: what the last replay left of its tape, with when it ended."""
    return None if kept is None else {"at": kept.at, **json.loads(kept.document)}
