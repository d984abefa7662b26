"""An exchange document (``evidence.document``) as plain text, section by section.

This is what ``show CASSETTE SEQ`` prints for people: everything ``--json`` holds, in the
order a reader looks for it. Lines are never wrapped or cut inside a value: a key, a digest
or a JSON body piped to a file or a CI log stays whole and can be copied back out. Long
bodies are cut after ``BODY_LINES`` lines with a note that says how much is left and that
``full`` shows all of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from freezeframe.canonicalize import eventstream
from freezeframe.evidence.inert import inert
from freezeframe.storage import boundedjson

BODY_LINES = 40
BODY_CHARS = 6000
CHUNKS_SHOWN = 10
MESSAGES_SHOWN = 50
HEX_WIDTH = 16


def exchange_lines(document: dict[str, Any], *, full: bool = False) -> Iterator[str]:
    """The lines of one exchange; headings start with ``== ``. Every line is inert: recorded
    text cannot command the terminal it is printed on."""
    for line in _lines(document, full):
        yield inert(line, newlines=False)


def _lines(document: dict[str, Any], full: bool) -> Iterator[str]:
    request, response = document["request"], document["response"]
    yield f"== #{document['seq']} {request['method']} {request['url']}"
    status = "-" if response is None else f"{response['status']} {response['reason']}".strip()
    yield f"outcome      {document['outcome']}, status {status}"
    if document["error"]:
        yield f"error        {document['error']}"
    yield f"key          {document['key']} (scheme {document['key_scheme']})"
    yield f"occurrence   {document['occurrence']} (0 is the first recording of this key)"
    if (origin := document["origin"]) is not None:
        yield (
            f"origin       {origin['kind']} from {origin['cassette']}#{origin['seq']} "
            f"(its chain value {origin['chain']})"
        )
        for change in origin["changes"]:
            yield f"  changed    {change}"
    timing = document["timing"]
    yield (
        f"timing       started {_time(timing['started_at'])}, first byte after "
        f"{_seconds(timing['first_byte_after'])}, took {_seconds(timing['duration'])}"
    )
    yield from _pairs("context", document["context"])
    yield from _pairs("metadata", document["metadata"])
    yield ""
    yield f"== request   {request['http_version']}"
    yield from _headers(request["headers"])
    yield from _body(request["body"], _content_type(request["headers"]), full)
    yield ""
    yield "== canonical form (what the key is computed from)"
    canonical = request["canonical"]
    if not isinstance(canonical, str):  # a form that is not JSON is shown as its text
        canonical = json.dumps(canonical, indent=2, ensure_ascii=False)
    yield from _clipped(canonical, full)
    stripped = document["stripped"]
    if stripped is None:
        yield "stripped     not kept (recorded before schema 4; freezeframe rekey computes it)"
    elif stripped:
        yield "stripped     (left out of the key; value digests, to tell drift)"
        width = max(len(part) for part in stripped)
        for part, digest in sorted(stripped.items()):
            yield f"  {part.ljust(width)}  {digest}"
    yield ""
    if response is None:
        yield "== response  none"
    else:
        yield f"== response  {response['status']} {response['reason']} {response['http_version']}"
        yield from _headers(response["headers"])
        yield from _body(response["body"], _content_type(response["headers"]), full)
        if response["trailers"]:
            yield "trailers"
            yield from _headers(response["trailers"])
        yield from _chunks(response["chunks"], full)
    if document["messages"] is not None:
        yield ""
        yield from _messages(document["messages"], full)
    if document.get("session") is not None:
        yield from _session(document["session"])
    yield ""
    yield "== replay"
    if not document["rewrites"]:
        yield "rewrites     none: replay sends the recorded bytes"
    for rewrite in document["rewrites"]:
        yield (
            f"rewritten on replay ({rewrite['when']}): {rewrite['header']}: "
            f"{rewrite['recorded']} -> {rewrite['replayed']}"
        )
    for drift in document["drift"]:
        context = ", ".join(f"{k}={v}" for k, v in drift["context"].items())
        yield (
            f"drifted on replay at {_time(drift['at'])}: {', '.join(drift['paths'])}"
            + (f" ({context})" if context else "")
        )
    yield f"chain        {document['chain']}"


def _pairs(title: str, values: dict[str, Any]) -> Iterator[str]:
    for n, (name, value) in enumerate(values.items()):
        label = title if n == 0 else ""
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value
        yield f"{label:<12} {name}: {shown}"


def _headers(headers: Sequence[Sequence[str]]) -> Iterator[str]:
    for name, value in headers:
        yield f"  {name}: {value}"


def _content_type(headers: Sequence[Sequence[str]]) -> str:
    return next((value for name, value in headers if name.lower() == "content-type"), "")


def _body(body: dict[str, Any], content_type: str, full: bool) -> Iterator[str]:
    size = body["bytes"]
    if "omitted" in body:
        yield f"body         {size:,} bytes, kept in the store (blake3 {body['blake3']})"
        return
    if size == 0:
        yield "body         empty"
        return
    if "text" not in body and eventstream.is_event_stream(content_type):
        events, damage = eventstream.json_events(base64.b64decode(body["base64"]))
        yield f"body         {size:,} bytes, {len(events):,} events, {content_type}"
        lines = [json.dumps(event, ensure_ascii=False) for event in events]
        yield from _clipped("\n".join(lines + ([f"({damage})"] if damage else [])), full)
        return
    if "text" not in body:
        yield f"body         {size:,} bytes, not text" + ("" if full else " (--full: hex)")
        if full:
            yield from _hex(base64.b64decode(body["base64"]))
        return
    text = body["text"]
    if "json" in content_type.lower():
        try:
            text = json.dumps(boundedjson.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    kind = f", {content_type}" if content_type else ""
    yield f"body         {size:,} bytes{kind}"
    yield from _clipped(text, full)


def _clipped(text: str, full: bool) -> Iterator[str]:
    lines = text.splitlines() or [""]
    if full:
        yield from lines
        return
    shown: list[str] = []
    used = 0
    for line in lines[:BODY_LINES]:
        if used + len(line) > BODY_CHARS and shown:
            break
        shown.append(line)
        used += len(line) + 1
    yield from shown
    hidden = len(lines) - len(shown)
    if hidden:
        rest = len(text) - used
        yield f"… {hidden:,} more lines ({rest:,} more characters); --full shows everything"


def _hex(data: bytes) -> Iterator[str]:
    for offset in range(0, len(data), HEX_WIDTH):
        row = data[offset : offset + HEX_WIDTH]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        yield f"  {offset:08x}  {row.hex(' '):<{HEX_WIDTH * 3}} {text}"


def _chunks(chunks: Sequence[Sequence[float]], full: bool) -> Iterator[str]:
    if not chunks:
        return
    first, last = chunks[0][1], chunks[-1][1]
    yield (
        f"chunks       {len(chunks)} arrived between {_seconds(first)} and {_seconds(last)} "
        "after the request started (offset at)"
    )
    shown = chunks if full else chunks[:CHUNKS_SHOWN]
    for offset, at in shown:
        yield f"  {int(offset):>10}  {at:.6f}s"
    if len(shown) < len(chunks):
        yield f"  … {len(chunks) - len(shown)} more; --full shows them all"


def _messages(messages: Sequence[dict[str, Any]], full: bool) -> Iterator[str]:
    yield f"== websocket {len(messages)} messages"
    shown = messages if full else messages[:MESSAGES_SHOWN]
    for message in shown:
        payload = message.get("text", f"<{message['bytes']} bytes, binary>")
        yield f"  {message['at']:9.3f}s {message['from']:>6}: {payload}"
    if len(shown) < len(messages):
        yield f"  … {len(messages) - len(shown)} more; --full shows them all"


def _session(session: dict[str, Any]) -> Iterator[str]:
    """The session key, and a Realtime session's transcript (evidence.document)."""
    yield f"session key  {session['key']} (the client's messages, minted ids left out)"
    if session["transcript"] is None:
        return
    yield ""
    yield f"== transcript ({session.get('model') or 'model not named'})"
    if session.get("system"):
        yield f"  {'system':>9}: {_one_line(session['system'])}"
    for turn in session["transcript"]:
        if turn["text"]:
            yield f"  {turn['role']:>9}: {_one_line(turn['text'])}"
        for call in turn["tool_calls"]:
            yield f"  {turn['role']:>9}: calls {call['name']}({_one_line(call['arguments'])})"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"


def _time(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
