"""AWS event streams (``application/vnd.amazon.eventstream``): Bedrock's streamed answers.

Each message is framed as AWS documents it (and as botocore's ``eventstream.py`` reads it):

    total length (4 bytes, big-endian) | headers length (4) | CRC32 of those 8 bytes (4)
    | headers | payload | CRC32 of everything before it (4)

A header is a name (1-byte length, then UTF-8), a type byte and a value; Bedrock sends
strings (type 7: 2-byte length, then UTF-8) for ``:event-type``, ``:message-type``
(``event`` or ``exception``), ``:exception-type`` and ``:content-type``. The other types are
read so a message that carries one is not taken for damage. botocore checks both CRCs and
drops the connection on a mismatch, so an encoded message must carry correct ones.

Decoding never raises: a cut-off or damaged tail ends the messages read, and says so.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from .jsonbody import JsonValue, NotJson, read_json

MEDIA_TYPE = "application/vnd.amazon.eventstream"
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")
_MIN_MESSAGE = 16
"""Prelude (8), its CRC (4) and the message CRC (4)."""
_MAX_MESSAGE = 16 * 1024 * 1024
"""botocore's limit on one message (``_MAX_PAYLOAD_LENGTH`` plus headers); longer is damage."""

# Header value types: their fixed sizes, or None for a 2-byte length then that many bytes.
_TRUE, _FALSE, _STRING = 0, 1, 7
_SIZES: dict[int, int | None] = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: None, 7: None, 8: 8, 9: 16}

HeaderValue = str | bytes | int | bool


@dataclass(frozen=True, slots=True)
class EventMessage:
    """One message: its headers by name, and its payload bytes."""

    headers: dict[str, HeaderValue]
    payload: bytes

    @property
    def event_type(self) -> str:
        """``:event-type`` (or ``:exception-type`` on an exception); "" when absent."""
        name = ":exception-type" if self.is_exception else ":event-type"
        value = self.headers.get(name)
        return value if isinstance(value, str) else ""

    @property
    def is_exception(self) -> bool:
        return self.headers.get(":message-type") in ("exception", "error")


@dataclass(frozen=True, slots=True)
class Decoded:
    """The messages read, and what stopped the reading before the end (None: nothing)."""

    messages: tuple[EventMessage, ...]
    damage: str | None


def is_event_stream(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == MEDIA_TYPE


def decode(data: bytes) -> Decoded:
    """Every whole message of ``data`` in order; a bad CRC or a cut tail stops the reading."""
    messages: list[EventMessage] = []
    at = 0
    while at < len(data):
        if len(data) - at < _MIN_MESSAGE:
            return Decoded(tuple(messages), f"cut off after {len(messages)} messages")
        total, headers_length = _PRELUDE.unpack_from(data, at)
        (prelude_crc,) = _CRC.unpack_from(data, at + 8)
        if zlib.crc32(data[at : at + 8]) != prelude_crc:
            return Decoded(tuple(messages), f"message {len(messages) + 1}: prelude CRC mismatch")
        if not _MIN_MESSAGE + headers_length <= total <= _MAX_MESSAGE:
            return Decoded(tuple(messages), f"message {len(messages) + 1}: bad lengths")
        if at + total > len(data):
            return Decoded(tuple(messages), f"cut off in message {len(messages) + 1}")
        end = at + total
        (message_crc,) = _CRC.unpack_from(data, end - 4)
        if zlib.crc32(data[at : end - 4]) != message_crc:
            return Decoded(tuple(messages), f"message {len(messages) + 1}: CRC mismatch")
        headers = _headers(data[at + 12 : at + 12 + headers_length])
        if headers is None:
            return Decoded(tuple(messages), f"message {len(messages) + 1}: bad headers")
        messages.append(EventMessage(headers, data[at + 12 + headers_length : end - 4]))
        at = end
    return Decoded(tuple(messages), None)


def ends(data: bytes, first: int, last: int) -> bytes:
    """The first ``first`` and last ``last`` messages of ``data``, found by their lengths
    alone (a long stream's facts sit at its ends: the model and ids in its first events, the
    stop reason and usage in its last), for `decode` to read and check. Walking the lengths
    costs a few microseconds a message; decoding all of a 10,000-event answer on the proxy's
    event loop would cost a fifth of a second."""
    starts: list[int] = []
    at = 0
    while at + _MIN_MESSAGE <= len(data):
        total = int.from_bytes(data[at : at + 4], "big")
        if total < _MIN_MESSAGE:
            break
        starts.append(at)
        at += total
    if len(starts) <= first + last:
        return data
    tail = starts[len(starts) - last] if last else len(data)
    return data[: starts[first]] + data[tail:]


def _headers(data: bytes) -> dict[str, HeaderValue] | None:
    headers: dict[str, HeaderValue] = {}
    at = 0
    while at < len(data):
        size = data[at]
        name = data[at + 1 : at + 1 + size].decode("utf-8", "replace")
        at += 1 + size
        if at >= len(data) or data[at] not in _SIZES:
            return None
        kind = data[at]
        at += 1
        width = _SIZES[kind]
        if width is None:
            if at + 2 > len(data):
                return None
            width = int.from_bytes(data[at : at + 2], "big")
            at += 2
        raw = data[at : at + width]
        if len(raw) != width:
            return None
        at += width
        value: HeaderValue
        if kind in (_TRUE, _FALSE):
            value = kind == _TRUE
        elif kind == _STRING:
            value = raw.decode("utf-8", "replace")
        elif kind in (6, 9):
            value = raw
        else:
            value = int.from_bytes(raw, "big", signed=True)
        headers[name] = value
    return headers


def encode(headers: Iterable[tuple[str, str]], payload: bytes) -> bytes:
    """One message with string headers, its CRCs computed as botocore checks them."""
    block = b"".join(_string_header(name, value) for name, value in headers)
    total = _MIN_MESSAGE + len(block) + len(payload)
    prelude = _PRELUDE.pack(total, len(block))
    head = prelude + _CRC.pack(zlib.crc32(prelude)) + block + payload
    return head + _CRC.pack(zlib.crc32(head))


def _string_header(name: str, value: str) -> bytes:
    key, text = name.encode(), value.encode()
    return bytes([len(key)]) + key + bytes([_STRING]) + len(text).to_bytes(2, "big") + text


def event(event_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """An ``event`` message as Bedrock sends one."""
    headers = (
        (":event-type", event_type),
        (":content-type", content_type),
        (":message-type", "event"),
    )
    return encode(headers, payload)


def exception(exception_type: str, payload: bytes) -> bytes:
    """An ``exception`` message as Bedrock sends one (e.g. ``throttlingException``)."""
    headers = (
        (":exception-type", exception_type),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    )
    return encode(headers, payload)


PADDING = "p"
"""Bedrock adds a field of random letters to each event's payload (``"p": "abcdefgh"``) so
that an event's size tells nothing of its content; it is noise to every reader."""


def json_events(data: bytes) -> tuple[list[dict[str, JsonValue]], str | None]:
    """A Bedrock stream's events as JSON objects in the shape boto3 gives them, and what
    stopped the reading (None: nothing).

    An event is ``{event type: payload}`` (``{"contentBlockDelta": {...}}``), its padding
    left out; an InvokeModelWithResponseStream ``chunk`` is the model's own event, its
    ``bytes`` base64-decoded and read as JSON (Anthropic's ``message_start``...); an
    exception is an error event, ``{"type": "error", "error": {"type", "message"}}``, as
    Anthropic's and OpenAI's streams carry theirs.
    """
    decoded = decode(data)
    events: list[dict[str, JsonValue]] = []
    for message in decoded.messages:
        value = _object(message.payload)
        if message.is_exception:
            text = value.get("message") or value.get("Message")
            detail: dict[str, JsonValue] = {"type": message.event_type}
            detail["message"] = text if isinstance(text, str) else ""
            events.append({"type": "error", "error": detail})
            continue
        chunk = value.get("bytes")
        if message.event_type == "chunk" and isinstance(chunk, str):
            try:
                inner = base64.b64decode(chunk, validate=True)
            except ValueError:
                continue
            found = _object(inner)
            if found:
                events.append(found)
            continue
        value.pop(PADDING, None)
        events.append({message.event_type: value})
    return events, decoded.damage


def _object(data: bytes) -> dict[str, JsonValue]:
    try:
        value = read_json(data)
    except NotJson:
        return {}
    return value if isinstance(value, dict) else {}
