"""Streamed answers put back together, one event at a time, into their whole shape.

Each API streams an answer as deltas (text a few words at a time, a tool call's arguments a
few characters at a time) and sends it whole when not streamed. A `Stream` of each provider
module takes the deltas in order and gives the whole answer in the shape the API sends when
not streaming, so one reader reads both, and a stream cut off half way still gives every
delta that arrived. Deltas are kept as lists of pieces and joined once at the end: joining
them one by one costs time in the square of a long answer's length. What a stream's events
say about ids, usage and finish reasons is read by `canonicalize.answer_facts`, the reader
behind the recorded metadata, not here.
"""

from __future__ import annotations

from typing import Protocol

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_list, as_str


class Stream(Protocol):
    """One answer's events, fed in the order they came."""

    end_marker: str
    """What the API sends to say the answer is over, for a note when it never came."""

    @property
    def ended(self) -> bool:
        """That end came."""

    @property
    def error(self) -> str | None:
        """An error event's message, when the stream carried one."""

    def feed(self, event: dict[str, JsonValue]) -> None:
        """One event's JSON."""

    def done(self) -> None:
        """The ``data: [DONE]`` line OpenAI's streams end with."""

    def whole(self) -> dict[str, JsonValue]:
        """The answer so far, in the shape the API gives when not streaming."""


def error_text(value: JsonValue) -> str | None:
    """The message of an error object: OpenAI's ``{"error": {...}}``, Anthropic's
    ``{"type": "error", "error": {...}}`` (anthropic/types/shared/error_response.py), or a
    Responses stream's ``error`` event (openai/types/responses/response_error_event.py)."""
    fields = as_dict(value)
    error = fields.get("error")
    if isinstance(error, str):
        return error
    detail = as_dict(error) or (fields if fields.get("type") == "error" else {})
    if not detail:
        return None
    message = as_str(detail.get("message")) or ""
    kind = as_str(detail.get("type")) or as_str(detail.get("code"))
    return f"{kind}: {message}" if kind and message else (message or kind or "an error")


def slot(parent: dict[str, JsonValue], key: str, index: JsonValue) -> dict[str, JsonValue]:
    """The object at ``parent[key][index]``, made (with every list and object on the way)
    when missing, for a delta that names a place its item was never announced at."""
    items = parent.get(key)
    if not isinstance(items, list):
        items = parent[key] = []
    at = index if isinstance(index, int) and 0 <= index < _MOST_PARTS else len(items)
    while len(items) <= at:
        items.append({})
    item = items[at]
    if not isinstance(item, dict):
        item = items[at] = {}
    return item


def index_of(value: JsonValue, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def listed(value: JsonValue) -> list[dict[str, JsonValue]]:
    """The objects of a JSON list, skipping anything else."""
    return [item for item in as_list(value) if isinstance(item, dict)]


_MOST_PARTS = 10_000
"""A delta naming a part index beyond this is appended instead: no answer has that many."""
