"""What of an exchange is searchable: its text, as distinct values.

Search answers questions such as "which runs did a tool answer with order ord_8821" or "which
exchanges did gpt-4o-2024-08-06 answer". The values that carry such facts are the leaves of
JSON bodies, so a JSON body is indexed as its string and number leaves, each one value; an
SSE stream as the leaves of its events, where the strings at one JSON path are joined in order
(a streamed answer arrives as "Hel", "lo": it is found as "Hello"); other text as itself; a
binary body not at all. Values are deduplicated by the store, so an agent's conversation, which
every request repeats, costs its new messages only. What the exchange says about itself (URL,
models, ids, run context, error) is indexed as metadata.

Nothing here knows a provider: the shapes are JSON, SSE, a stream sent as one JSON array,
and AWS event streams (whose payloads are JSON), nothing more.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from freezeframe.storage import boundedjson
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


def searchable(exchange: NewExchange) -> list[Searchable]:
    """The distinct values of ``exchange`` that search finds it by."""
    found: dict[tuple[str, str], None] = {}

    def add(part: str, values: Iterator[str]) -> None:
        for n, value in enumerate(_unwrapped(values)):
            if n >= MAX_VALUES:
                break
            text = value.strip()[:MAX_TEXT]
            if text:
                found.setdefault((part, text))

    add("metadata", _metadata(exchange))
    if exchange.request_body_ref is None:
        add("request", _values(exchange.request_body, exchange.request_headers))
    if exchange.response is not None:
        found.update(dict.fromkeys((v.part, v.text) for v in answer_values(exchange.response)))
    if exchange.messages:
        add("request", _message_values(m for m in exchange.messages if m.from_client))
        add("response", _message_values(m for m in exchange.messages if not m.from_client))
    return [Searchable(part, text) for part, text in found]


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


def _values(body: bytes, headers: Sequence[Header]) -> Iterator[str]:
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
    yield from _leaves(document)


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
