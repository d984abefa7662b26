"""What of an exchange is searchable: its text, as distinct values.

Search answers questions such as "which runs did a tool answer with order ord_8821" or "which
exchanges did gpt-4o-2024-08-06 answer". The values that carry such facts are the leaves of
JSON bodies, so a JSON body is indexed as its string and number leaves, each one value; an
SSE stream as the leaves of its events, where the strings at one JSON path are joined in order
(a streamed answer arrives as "Hel", "lo": it is found as "Hello"); other text as itself; a
binary body not at all. Values are deduplicated by the store, so an agent's conversation, which
every request repeats, costs its new messages only. What the exchange says about itself (URL,
models, ids, run context, error) is indexed as metadata.

A writer reads each request of a conversation against the one before it (Conversations): a
part of the new request's JSON equal to the part at the same place in the last request
indexed of that cassette and endpoint holds values already listed there, and is not walked
again. So a turn costs the writer a parse of the request and what the turn adds, not every
value of the history digested and looked up once more (#30).

Nothing here knows a provider: the shapes are JSON, SSE, a stream sent as one JSON array,
and AWS event streams (whose payloads are JSON), nothing more.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from freezeframe.storage import boundedjson
from freezeframe.storage.deltas import common_ends
from freezeframe.storage.encodings import decode_body
from freezeframe.storage.records import (
    FactValue,
    Header,
    Message,
    NewExchange,
    RecordedResponse,
)

MAX_TEXT = 64 * 1024
"""Characters kept of one value; the rest of a longer one is not searchable."""
MAX_VALUES = 4096
"""Values indexed per part of an exchange (request, response, metadata)."""
MAX_BODY = 16 * 1024 * 1024
"""Decoded bytes read of one body; a larger one is indexed by its metadata only."""
KEPT_REQUESTS = 32 * 1024 * 1024
"""Decoded bytes of requests a writer keeps, parsed, to read the next request of each
conversation against (least recently used conversation dropped first: it is then read
whole, as before)."""
REQUESTS_PER_GROUP = 4
"""Conversations followed at once per cassette and endpoint (storage.deltas' lines)."""

_AUDIO_EVENTS = ("audio.delta", "audio_buffer.append")
_SEARCHED_FACTS = (
    "model",
    "answered_model",
    "system_fingerprint",
    "response_id",
    "request_id",
    "finish_reason",
    "provider",
    "api",
    "trace_id",
)


@dataclass(frozen=True, slots=True)
class Searchable:
    """One value to index, and which part of the exchange holds it."""

    part: str
    """``request``, ``response`` or ``metadata``."""
    text: str


class Values(list[Searchable]):
    """The distinct values of an exchange, and the request they were read from: once they
    are indexed, the writer remembers it (Conversations.remember) for its conversation's
    next request."""

    __slots__ = ("request", "replaces")

    def __init__(
        self,
        values: Iterable[Searchable],
        request: _Request | None = None,
        replaces: _Request | None = None,
    ) -> None:
        super().__init__(values)
        self.request = request
        self.replaces = replaces
        """The remembered request whose conversation ``request`` continues."""


def searchable(exchange: NewExchange) -> Values:
    """The distinct values of ``exchange`` that search finds it by."""
    return _searchable(exchange, None)


def _searchable(exchange: NewExchange, walk: _Walk | None) -> Values:
    """The distinct values of ``exchange``; with ``walk``, of its request only those its
    conversation's last indexed request did not hold at the same place."""
    found: dict[tuple[str, str], None] = {}

    def add(part: str, values: Iterator[str]) -> bool:
        """Take the values; False when MAX_VALUES cut them off."""
        for n, value in enumerate(_unwrapped(values)):
            if n >= MAX_VALUES:
                return False
            text = value.strip()[:MAX_TEXT]
            if text:
                found.setdefault((part, text))
        return True

    add("metadata", _metadata(exchange))
    request = replaces = None
    if exchange.request_body_ref is None:
        whole = add("request", _values(exchange.request_body, exchange.request_headers, walk))
        if whole and walk is not None and walk.document is not _NOTHING:
            # A request cut off at MAX_VALUES is not remembered: what it did not index
            # must not be taken as listed.
            request = _Request(walk.group, walk.data, walk.document)
            replaces = walk.continues
    if exchange.response is not None:
        found.update(dict.fromkeys((v.part, v.text) for v in answer_values(exchange.response)))
    if exchange.messages:
        add("request", _message_values(m for m in exchange.messages if m.from_client))
        add("response", _message_values(m for m in exchange.messages if not m.from_client))
    return Values((Searchable(part, text) for part, text in found), request, replaces)


_Group = tuple[int, str, int, str]
"""A conversation's place: the cassette's row id, host, port and path (storage.deltas'
line). The row id, not the name: a cassette removed and made again is another one."""


class _Nothing:
    """No document (a JSON body may be ``null``)."""


_NOTHING = _Nothing()


@dataclass(frozen=True, slots=True, eq=False)
class _Request:
    """A request body indexed, decoded and parsed (compared by identity)."""

    group: _Group
    data: bytes
    document: object


@dataclass(slots=True)
class _Walk:
    """One request body read against its conversation: what it was parsed into and what it
    was read against, filled in by _values as it reads the body."""

    conversations: Conversations
    group: _Group
    data: bytes = b""
    document: object = _NOTHING
    continues: _Request | None = None


class Conversations:
    """The requests a writer indexed last, decoded and parsed, per cassette and endpoint
    (up to REQUESTS_PER_GROUP each, KEPT_REQUESTS bytes in all).

    What it promises rests on search's own promise for a request's values: each is listed at
    the request of its cassette that first carried it (storage.sql.search). A part of a new
    request equal to the part at the same place in a remembered request of the same cassette
    holds only values that request held, so they are listed already, at it or before it. A
    request is remembered only once its values are indexed, and the writer clears what it
    remembers whenever values may be gone (a cassette removed, an index rolled back): a
    request then is read whole again. Python's equality is the test, so a number that only
    changed its type at one place (1 where 1.0 or true was) counts as the same value.

    Not thread-safe: the store's one writer thread owns it.
    """

    def __init__(self, budget: int = KEPT_REQUESTS) -> None:
        self._budget = budget
        self._size = 0
        self._groups: OrderedDict[_Group, list[_Request]] = OrderedDict()

    def values(self, exchange: NewExchange, cassette_id: int) -> Values:
        """The distinct values of ``exchange`` (of cassette row ``cassette_id``), of its
        request only those its conversation's last indexed request did not hold at the same
        place; remember them once indexed."""
        path = exchange.path.partition("?")[0]
        return _searchable(exchange, _Walk(self, (cassette_id, exchange.host, exchange.port, path)))

    def base(self, group: _Group, data: bytes) -> tuple[_Request | None, bool]:
        """The remembered request of ``group`` that shares the most with ``data`` at both
        ends (the conversation so far, and what an SDK sends after it), if any, and whether
        ``data`` continues its conversation: shares at least half of the shorter one, as
        storage.deltas decides. Another conversation's request still spares what the two
        share (a system prompt, tool schemas), and is kept."""
        kept = self._groups.get(group)
        if not kept:
            return None, False
        shared, best = max(
            ((common_ends(request.data, data), request) for request in reversed(kept)),
            key=lambda pair: pair[0],
        )
        return best, 2 * shared >= min(len(best.data), len(data))

    def remember(self, values: Sequence[Searchable]) -> None:
        """Note the request ``values`` were read from, now that they are indexed: it takes
        the place of the request it was read against, as its conversation's latest."""
        if not isinstance(values, Values) or values.request is None:
            return
        request, replaced = values.request, values.replaces
        if len(request.data) > self._budget:
            return
        kept = self._groups.setdefault(request.group, [])
        if any(each is request for each in kept):
            return
        self._groups.move_to_end(request.group)
        if replaced is not None and any(each is replaced for each in kept):
            kept.remove(replaced)
            self._size -= len(replaced.data)
        kept.append(request)
        self._size += len(request.data)
        if len(kept) > REQUESTS_PER_GROUP:
            self._size -= len(kept.pop(0).data)
        while self._size > self._budget:
            _, dropped = self._groups.popitem(last=False)
            self._size -= sum(len(each.data) for each in dropped)

    def clear(self) -> None:
        """Forget every request: values they held may no longer be listed."""
        self._groups.clear()
        self._size = 0


def answer_values(response: RecordedResponse) -> list[Searchable]:
    """The distinct values of an answer alone (an edited answer is indexed this way)."""
    if response.body_ref is not None:
        return []
    found = dict.fromkeys(
        text
        for n, value in enumerate(_unwrapped(_values(response.body, response.headers)))
        if n < MAX_VALUES and (text := value.strip()[:MAX_TEXT])
    )
    return [Searchable("response", text) for text in found]


def transcript_values(messages: Iterable[Message], *, client: bool) -> list[Searchable]:
    """The distinct values of one side of a WebSocket's messages (an edited session's server
    side is indexed this way)."""
    part = "request" if client else "response"
    found = dict.fromkeys(
        text
        for n, value in enumerate(
            _unwrapped(_message_values(m for m in messages if m.from_client is client))
        )
        if n < MAX_VALUES and (text := value.strip()[:MAX_TEXT])
    )
    return [Searchable(part, text) for text in found]


def _unwrapped(values: Iterable[str]) -> Iterator[str]:
    """Each value, or for a string that is itself a JSON object or array, its leaves.

    An agent carries a tool's JSON answer into its next request as a string (OpenAI's and
    Anthropic's tool results, a call's ``arguments``): indexed whole, that string is a second
    copy of every value the tool's answer already gave, and of the words in them. As its
    leaves it is the same values, stored once (issue #31: a fifth of the index on agent
    traffic). Only one level is opened; a string that does not parse is kept as it is."""
    for value in values:
        if value[:1] not in _OPENERS or value[-1:] not in _CLOSERS:
            yield value
            continue
        try:
            document = boundedjson.loads(value)
        except ValueError:
            yield value
            continue
        yield from _leaves(document)


_OPENERS = ("{", "[")
_CLOSERS = ("}", "]")


def _metadata(exchange: NewExchange) -> Iterator[str]:
    yield f"{exchange.method} {exchange.scheme}://{exchange.host}:{exchange.port}{exchange.path}"
    yield exchange.host
    # Apart as well: a full-text parser may read a URL as one token, and a query value is
    # what someone searches for (an order id, a customer).
    path, _, query = exchange.path.partition("?")
    yield path
    for _, value in parse_qsl(query, keep_blank_values=False):
        yield value
    yield from _facts(exchange.facts)
    yield from exchange.context.values()
    if exchange.error:
        yield exchange.error


def _facts(facts: Mapping[str, FactValue]) -> Iterator[str]:
    for name in _SEARCHED_FACTS:
        value = facts.get(name)
        if isinstance(value, str):
            yield value


def _values(body: bytes, headers: Sequence[Header], walk: _Walk | None = None) -> Iterator[str]:
    """A body's values; a JSON document's read against its conversation's last request
    when ``walk`` says which conversation (and is told what the body was parsed into)."""
    if not body:
        return
    decoded = decode_body(body, headers, MAX_BODY).data  # what decodes, cut or capped
    if not decoded:
        return
    if _is_media(headers, b"application/vnd.amazon.eventstream"):
        yield from _joined(_event_stream_payloads(decoded))
        return
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return
    if _is_event_stream(headers) or text.startswith(("data:", "event:")):
        yield from _stream_values(text)
        return
    try:
        document = boundedjson.loads(text)
    except ValueError:
        yield text
        return
    if isinstance(document, list) and document and all(isinstance(i, dict) for i in document):
        # A stream sent as one JSON array (Gemini's without alt=sse): pieces joined by path.
        yield from _joined(document)
        return
    if walk is None or not isinstance(document, dict | list):
        yield from _leaves(document)
        return
    walk.data, walk.document = decoded, document
    base, continues = walk.conversations.base(walk.group, decoded)
    walk.continues = base if continues else None
    if base is None:
        yield from _leaves(document)
    else:
        yield from _new_leaves(document, base.document)


def _is_event_stream(headers: Sequence[Header]) -> bool:
    return _is_media(headers, b"text/event-stream")


def _is_media(headers: Sequence[Header], media_type: bytes) -> bool:
    return any(
        name.lower() == b"content-type" and value.lower().startswith(media_type)
        for name, value in headers
    )


_PADDING = "p"
"""Bedrock's random padding field in each event: noise, never indexed."""


def _event_stream_payloads(data: bytes) -> Iterator[object]:
    """The JSON payloads of an AWS event stream (Bedrock's streamed answers), a ``chunk``'s
    base64 ``bytes`` decoded to the model's own event, padding left out.

    Only the framing lengths are read (total, headers; canonicalize.eventstream is the full
    codec, and storage may not import it): a message whose lengths do not fit ends the walk.
    """
    at = 0
    while at + 16 <= len(data):
        total = int.from_bytes(data[at : at + 4], "big")
        headers = int.from_bytes(data[at + 4 : at + 8], "big")
        if total < 16 + headers or at + total > len(data):
            return
        payload = data[at + 12 + headers : at + total - 4]
        at += total
        try:
            value = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        value.pop(_PADDING, None)
        chunk = value.get("bytes")
        if isinstance(chunk, str):
            try:
                value = json.loads(base64.b64decode(chunk, validate=True))
            except ValueError:
                continue
        yield value


def _joined(events: Iterable[object]) -> Iterator[str]:
    """The leaves of a stream's events, the strings at one path joined in event order."""
    joined: dict[str, list[str]] = {}
    for event in events:
        for path, leaf, is_string in _paths(event):
            if is_string:
                joined.setdefault(path, []).append(leaf)
            else:
                yield leaf
    for pieces in joined.values():
        yield pieces[0] if len(set(pieces)) == 1 else "".join(pieces)


def _leaves(value: object) -> Iterator[str]:
    """The string and number leaves of a JSON value, depth first, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            yield str(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _new_leaves(value: object, before: object) -> Iterator[str]:
    """The leaves of ``value`` as _leaves gives them, less those in a part equal to the part
    at the same place (key, or index in a list) in ``before``. Equal parts are skipped by
    one comparison each, at C speed: a conversation's history is its list of messages, each
    equal to the one at its index in the request before."""
    stack: list[tuple[object, object]] = [(value, before)]
    while stack:
        item, was = stack.pop()
        if isinstance(item, str):
            if item != was:
                yield item
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            if type(item) is not type(was) or item != was:
                yield str(item)
        elif isinstance(item, dict):
            if item == was:
                continue
            old = was if isinstance(was, dict) else {}
            stack.extend((child, old.get(key, _NOTHING)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            if item == was:
                continue
            older = was if isinstance(was, list) else []
            stack.extend(
                (item[n], older[n] if n < len(older) else _NOTHING)
                for n in range(len(item) - 1, -1, -1)
            )


def _stream_values(text: str) -> Iterator[str]:
    """An SSE stream's JSON leaves; the strings at one path joined in event order."""
    joined: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        try:
            event = boundedjson.loads(data)
        except ValueError:
            if data and data != "[DONE]":
                yield data
            continue
        for path, leaf, is_string in _paths(event):
            if is_string:
                joined.setdefault(path, []).append(leaf)
            else:
                yield leaf
    for pieces in joined.values():
        # A value every event repeats (an id, the model) is one value; the pieces of a
        # streamed text are joined into it.
        yield pieces[0] if len(set(pieces)) == 1 else "".join(pieces)


def _message_values(messages: Iterable[Message]) -> Iterator[str]:
    """A WebSocket's JSON text messages as an SSE stream's events: the strings at one path of
    one event ``type`` joined in order (a Realtime answer's text deltas make its text).
    Audio, which these APIs send as base64 in ``…audio.delta`` and ``…audio_buffer.append``
    events, is not text and is left out, as are binary messages."""
    joined: dict[tuple[str, str], list[str]] = {}
    for message in messages:
        if not message.text:
            continue
        try:
            event = json.loads(message.data)
        except ValueError:
            yield message.data.decode("utf-8", "replace")
            continue
        kind = event.get("type") if isinstance(event, dict) else None
        if isinstance(kind, str) and kind.endswith(_AUDIO_EVENTS):
            continue
        for path, leaf, is_string in _paths(event):
            if is_string:
                joined.setdefault((str(kind), path), []).append(leaf)
            else:
                yield leaf
    for pieces in joined.values():
        yield pieces[0] if len(set(pieces)) == 1 else "".join(pieces)


def _paths(value: object) -> Iterator[tuple[str, str, bool]]:
    """(path, leaf as text, whether it is a string) for the leaves of a JSON value."""
    stack: list[tuple[str, object]] = [("$", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            yield path, item, True
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            yield path, str(item), False
        elif isinstance(item, dict):
            stack.extend((f"{path}.{key}", child) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{n}]", child) for n, child in reversed(list(enumerate(item))))
