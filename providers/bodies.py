"""A recorded exchange's bodies as evidence reads them: content-decoded, then JSON.

JSON is read with ``canonicalize``'s reader, the one that keys requests, so a body is JSON
here exactly when it is JSON to the key. The helpers below take a value apart without
raising, because recorded bodies are whatever a client or server sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from freezeframe.canonicalize.jsonbody import JsonValue, NotJson, Number, read_json
from freezeframe.storage import BlobRef, Exchange, Header
from freezeframe.storage.encodings import decode_body


@dataclass(frozen=True, slots=True)
class Body:
    """One body, decoded as far as it could be."""

    data: bytes
    """The decoded bytes (b"" when none could be read)."""
    whole: bool
    """All of it was read; when False, ``note`` says why not."""
    note: str | None = None


def request_body(exchange: Exchange) -> Body:
    body, ref = exchange.recorded.request_body, exchange.recorded.request_body_ref
    return _body("request", body, ref, exchange.recorded.request_headers)


def response_body(exchange: Exchange) -> Body | None:
    """The answer's body; None when no answer came."""
    response = exchange.recorded.response
    if response is None:
        return None
    return _body("answer", response.body, response.body_ref, response.headers)


def _body(what: str, data: bytes, ref: BlobRef | None, headers: Sequence[Header]) -> Body:
    if ref is not None:
        return Body(b"", False, f"the {what} body ({ref.size:,} bytes) is kept in the store")
    decoded = decode_body(data, headers)
    note = None if decoded.note is None else f"the {what} body {decoded.note}"
    return Body(decoded.data, decoded.whole, note)


def parse_json(data: bytes) -> JsonValue:
    """The JSON value of ``data``, or None when it is not JSON (an SSE ``[DONE]``, a cut
    chunk); a JSON ``null`` is None too, which no reader here tells apart."""
    try:
        return read_json(data)
    except NotJson:
        return None


def header(headers: Sequence[Header], name: bytes) -> str | None:
    """A header's value, repeated lines joined with ", "; None when absent."""
    values = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    return ", ".join(values) if values else None


def media_type(headers: Sequence[Header]) -> str:
    """The lower-cased media type of ``Content-Type``, without parameters; "" when absent."""
    return (header(headers, b"content-type") or "").split(";", 1)[0].strip().lower()


def as_dict(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def as_list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def as_str(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def json_ready(value: JsonValue) -> Any:
    """``value`` with every ``Number`` (a token no Python number holds exactly) as the nearest
    float, or as its token when that is infinite, so ``json.dumps`` takes it."""
    if isinstance(value, Number):
        number = float(value.token)
        return number if math.isfinite(number) else value.token
    if isinstance(value, dict):
        return {name: json_ready(item) for name, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item) for item in value]
    return value


def json_text(value: JsonValue) -> str:
    """Compact JSON text of ``value``, members in their order, non-ASCII as is."""
    return json.dumps(json_ready(value), ensure_ascii=False, separators=(",", ":"))
