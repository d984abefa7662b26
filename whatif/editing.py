"""One recorded answer, changed: the "what if the tool had said…" of an edited fork.

An edit takes the recorded answer and changes what the user asks for: the whole body from a
file, values at JSON paths (``--set '$.orders=[{"id": "ord_1"}]'``), the status, headers.
Everything else stays as recorded: the encoding (a gzip answer is edited decoded and
gzipped again), the framing (``Content-Length`` follows the new body), the time of the first
byte. Each change is described in one line, which the fork keeps beside the original's chain
value, so ``show``, the case file and exports can say what was edited and how.

An edited answer is complete: it is served whole, at the recorded time of its first byte.
A streamed answer is edited as the message its stream puts together and streamed again
(restream.py); its events are spread evenly between the recorded first and last byte.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize
from freezeframe.canonicalize.eventstream import is_event_stream
from freezeframe.canonicalize.jsonpath import BadPath, JsonPath, Member, parse_path, render
from freezeframe.canonicalize.profiles.mcp import is_stream_request
from freezeframe.evidence.facts import exchange_facts
from freezeframe.evidence.requests import stored_view
from freezeframe.providers import gemini
from freezeframe.providers.bodies import media_type
from freezeframe.providers.jsonrpc_stream import NotJsonRpcStream, edit_response_event
from freezeframe.storage import Chunk, Edit, Exchange, Header, RecordedResponse, boundedjson
from freezeframe.storage.encodings import content_codings, decode_body, encode
from freezeframe.whatif.realtime_edit import NotEditable, edit_last_response
from freezeframe.whatif.reframe import reframe
from freezeframe.whatif.restream import NotRestreamable

SHOWN = 60
"""Characters of a value shown in a change's description."""


class EditError(ValueError):
    """An edit that cannot be made; the message says what and where, in one line."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """``--set PATH=JSON``: the value to put at every place the path selects."""

    path: JsonPath
    value: Any

    @classmethod
    def parse(cls, text: str) -> Assignment:
        path, sep, value = text.partition("=")
        if not sep:
            raise EditError(f"--set {text!r}: expected JSONPATH=JSON, e.g. '$.orders[0].id=\"x\"'")
        try:
            parsed_path = parse_path(path.strip())
        except BadPath as exc:
            raise EditError(f"--set {text!r}: {exc}") from None
        try:
            parsed = boundedjson.loads(value)
        except ValueError as exc:
            raise EditError(
                f"--set {text!r}: the value is not JSON ({exc}){_quoting_hint(path, value)}"
            ) from None
        return cls(parsed_path, parsed)


def _quoting_hint(path: str, value: str) -> str:
    """``$.status=shipped`` means the string "shipped", which JSON writes in quotes: say so,
    with the assignment as it should be typed."""
    if not value.strip() or value.lstrip()[:1] in '{["':
        return ""
    return f"; a string needs quotes: '{path}={json.dumps(value.strip())}'"


@dataclass(frozen=True, slots=True)
class AnswerEdit:
    """What to change in one answer; what is not given stays as recorded."""

    body: bytes | None = None
    """The whole new body, decoded (it is encoded as the answer was)."""
    sets: tuple[Assignment, ...] = ()
    status: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    """Headers to set, replacing every recorded one of the same name."""
    source: str = "a file"
    """What the new body came from, for the description."""


def edited(exchange: Exchange, edit: AnswerEdit, config: KeyConfig) -> Edit:
    """The Edit a fork applies to ``exchange``. Raises EditError."""
    where = f"{exchange.recorded.cassette}#{exchange.seq}"
    recorded = exchange.recorded.response
    if recorded is None:
        raise EditError(f"{where} has no answer to edit ({exchange.recorded.outcome.value})")
    if recorded.body_ref is not None:
        raise EditError(f"{where}: the answer is {recorded.body_ref.size} bytes, too large to edit")
    if edit.body is not None and edit.sets:
        raise EditError("--response-body and --set cannot be combined: --set edits the recording")
    if exchange.recorded.messages is not None and edit.sets:
        return _edited_session(exchange, recorded, edit, where)
    view = stored_view(exchange)
    profile = canonicalize(view, config).profile
    changes: list[str] = []
    codings = content_codings(recorded.headers)
    body = recorded.body
    first = recorded.chunks[0].at if recorded.chunks else (recorded.first_byte_at or 0.0)
    frames = [body]
    if edit.body is not None or edit.sets:
        found = decode_body(recorded.body, recorded.headers)
        if not found.whole:
            raise EditError(f"{where}: the answer does not decode whole ({found.note})")
        frames = [found.data]
        if edit.body is not None:
            changes.append(f"body replaced with {edit.source} ({len(edit.body)} bytes)")
            frames = [edit.body]
        elif _streamed(media_type(recorded.headers), profile, found.data):
            frames = _set_stream(found.data, _stream_api(view, profile), edit.sets, where, changes)
        else:
            frames = [_set(found.data, edit.sets, where, changes)]
        body = encode(b"".join(frames), codings)
    headers = _headers(recorded.headers, edit.headers, changes)
    if edit.body is not None and not any(n.lower() == "content-type" for n, _ in edit.headers):
        headers = _typed(headers, edit.body, changes)
    headers = _content_length(headers, len(body))
    status = recorded.status
    if edit.status is not None and edit.status != status:
        changes.append(f"status {status} -> {edit.status}")
        status = edit.status
    if not changes:
        raise EditError(
            f"{where}: nothing to change; give --response-body, --set, --status or --header"
        )
    last = recorded.chunks[-1].at if recorded.chunks else first
    response = dataclasses.replace(
        recorded,
        status=status,
        reason=recorded.reason if status == recorded.status else _phrase(status),
        headers=headers,
        body=body,
        chunks=_timed([body] if codings else frames, first, last) if body else (),
        trailers=(),
    )
    return Edit(response, exchange_facts(view, response, profile), tuple(changes))


def _edited_session(
    exchange: Exchange, recorded: RecordedResponse, edit: AnswerEdit, where: str
) -> Edit:
    """A WebSocket's last response edited (whatif.realtime_edit): an OpenAI Realtime
    session's, at the paths ``response.done`` has it."""
    if edit.status is not None or edit.headers:
        raise EditError(
            f"{where}: a WebSocket's --set cannot be combined with --status or --header"
        )
    changes: list[str] = []
    try:
        messages, audio = edit_last_response(
            exchange.recorded.messages or (), lambda found: _apply(found, edit.sets, where, changes)
        )
    except NotEditable as exc:
        raise EditError(f"{where}: --set cannot edit this session: {exc}") from None
    if audio:
        changes.append("its audio is left as recorded")
    return Edit(recorded, dict(exchange.recorded.facts), tuple(changes), messages)


def _stream_api(view: RequestView, profile: str) -> str:
    """The API whose framing a stream is edited in: the request's profile, or ``mcp`` for an
    MCP stream a ``GET`` opened (its JSON-RPC response travels there after a resumption)."""
    if profile != "mcp" and is_stream_request(view.method, view.headers):
        return "mcp"
    return profile


def _streamed(kind: str, api: str, body: bytes) -> bool:
    """Server-sent events, an AWS event stream, or Gemini's stream as one JSON array."""
    if kind == "text/event-stream" or is_event_stream(kind):
        return True
    return api == gemini.API and body.lstrip().startswith(b"[")


def _set(body: bytes, sets: Sequence[Assignment], where: str, changes: list[str]) -> bytes:
    try:
        document = boundedjson.loads(body)
    except ValueError:
        raise EditError(f"{where}: --set edits a JSON answer, and this one is not JSON") from None
    return json.dumps(_apply(document, sets, where, changes), ensure_ascii=False).encode()


def _set_stream(
    body: bytes, api: str, sets: Sequence[Assignment], where: str, changes: list[str]
) -> list[bytes]:
    """The frames of a stream whose message had ``sets`` applied."""
    if api == "mcp":
        try:
            return edit_response_event(body, lambda found: _apply(found, sets, where, changes))
        except NotJsonRpcStream as exc:
            raise EditError(f"{where}: --set cannot edit this MCP event stream: {exc}") from None
    try:
        found = reframe(api, body)
    except NotRestreamable as exc:
        raise EditError(f"{where}: --set cannot edit this streamed answer: {exc}") from None
    return found.encode(_apply(found.message, sets, where, changes))


def _apply(document: Any, sets: Sequence[Assignment], where: str, changes: list[str]) -> Any:
    for assignment in sets:
        places = assignment.path.find(document)
        if not places:
            document = _add(document, assignment, where)
            changes.append(f"{assignment.path.text}: (absent) -> {_short(assignment.value)}")
            continue
        for location, old in places:
            document = put_at(document, location, assignment.value)
            changes.append(f"{render(location)}: {_short(old)} -> {_short(assignment.value)}")
    return document


def _timed(frames: Sequence[bytes], first: float, last: float) -> tuple[Chunk, ...]:
    """One chunk per frame, spread evenly from the recorded first byte to the last."""
    chunks = []
    offset = 0
    step = (last - first) / (len(frames) - 1) if len(frames) > 1 else 0.0
    for n, frame in enumerate(frames):
        chunks.append(Chunk(offset, first + n * step))
        offset += len(frame)
    return tuple(chunks)


def _add(document: Any, assignment: Assignment, where: str) -> Any:
    """A new member where the path's parent exists: ``$.a.b=1`` into ``{"a": {}}``."""
    steps = assignment.path.steps
    last = steps[-1] if steps else None
    if isinstance(last, Member):
        parents = JsonPath(assignment.path.text, steps[:-1]).find(document)
        if len(parents) == 1 and isinstance(parents[0][1], dict):
            return put_at(document, (*parents[0][0], last.name), assignment.value)
    raise EditError(f"{where}: --set {assignment.path.text} selects nothing in the answer")


def put_at(document: Any, location: tuple[str | int, ...], value: Any) -> Any:
    """``document`` with ``value`` at ``location`` (a path's match), changed in place; the
    empty location replaces the whole document, so the caller keeps what this returns."""
    if not location:
        return value
    target = document
    for key in location[:-1]:
        target = target[key]
    target[location[-1]] = value
    return document


def _headers(
    recorded: Sequence[Header], wanted: Sequence[tuple[str, str]], changes: list[str]
) -> tuple[Header, ...]:
    headers = list(recorded)
    for name, value in wanted:
        lower = name.lower().encode("latin-1")
        before = [v.decode("latin-1") for n, v in headers if n.lower() == lower]
        headers = [(n, v) for n, v in headers if n.lower() != lower]
        headers.append((name.encode("latin-1"), value.encode("latin-1")))
        changes.append(f"header {name}: {', '.join(before) or '(absent)'} -> {value}")
    return tuple(headers)


def _typed(headers: Sequence[Header], body: bytes, changes: list[str]) -> tuple[Header, ...]:
    """A streamed answer replaced by a JSON document (``--status 429 --response-body
    x.json``) is typed as JSON: left ``text/event-stream``, an SDK read the error as a
    stream and lost it."""
    recorded = media_type(headers)
    if recorded != "text/event-stream":
        return tuple(headers)
    try:
        json.loads(body)
    except ValueError:
        return tuple(headers)
    changes.append(f"header content-type: {recorded} -> application/json (the new body is JSON)")
    return _headers(headers, [("content-type", "application/json")], [])


def _phrase(status: int) -> str:
    """The standard reason phrase of a status an edit gave (HTTP/1 clients show it)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _content_length(headers: Sequence[Header], size: int) -> tuple[Header, ...]:
    """A recorded Content-Length follows the new body; a chunked answer stays chunked."""
    return tuple(
        (name, str(size).encode()) if name.lower() == b"content-length" else (name, value)
        for name, value in headers
    )


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def header_pair(text: str) -> tuple[str, str]:
    """``--header 'Name: value'`` as a pair; ValueError naming what is not one."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"--header {text!r}: expected 'Name: value'")
    return name.strip(), value.strip()
