"""A model's answer as the agent received it: text, tool calls, and what it says of itself.

The body is read as an SSE stream or as one JSON object, whichever it is (by its content
type, or by its first bytes when it has none), and the provider's `Stream` puts the text and
tool calls back together. Its ids, usage and finish reason are read by
`canonicalize.answer_facts`, the reader behind the recorded metadata, so the two agree; for
an answer that reader does not read (one over its FACTS_BODY_LIMIT, or one the store keeps
out of memory) the recorded metadata fill in what they hold. An answer that did not end
properly (cut off, a stream without its end event, an error event) says so, and gives
everything that came before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from freezeframe.canonicalize import ResponseView, answer_facts, eventstream, sse_events
from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.apis import ApiReader
from freezeframe.providers.bodies import as_dict, media_type, parse_json, response_body
from freezeframe.providers.messages import ToolCall
from freezeframe.providers.parts import Part
from freezeframe.providers.streams import Stream, error_text
from freezeframe.storage import Exchange, Outcome

_SSE_START = (b"data:", b"event:", b":")
_DONE = b"[DONE]"


@dataclass(frozen=True, slots=True)
class Answer:
    """What came back from one model call."""

    status: int
    streamed: bool
    """It came as server-sent events."""
    complete: bool
    """It ended properly: a stream sent its end event, a JSON answer parsed whole, any other
    body arrived to its last byte, and any content coding decoded. The connection may still
    have ended badly afterwards (a client that stops reading at ``[DONE]`` is recorded as
    truncated): the step's outcome says so. An error answer that arrived whole is complete;
    ``error`` tells it."""
    text: str
    """The text parts, one per line (a stream's deltas joined)."""
    parts: tuple[Part, ...]
    """Everything the model wrote but its tool calls, in order: text, refusals, thinking,
    and the calls and results of tools the provider ran itself."""
    tool_calls: tuple[ToolCall, ...]
    """The calls it asked the client to make, streamed arguments joined."""
    finish_reason: str | None
    """``finish_reason``, ``stop_reason``, or a Response's status or incomplete reason."""
    usage: Mapping[str, int]
    """Token counts as the provider named them, nested details as ``a.b``."""
    system_fingerprint: str | None
    response_id: str | None
    model: str | None
    """The model that answered, which may differ from the one asked for."""
    error: str | None
    """The error the answer carried: an error body, or an error event in the stream."""


def read_answer(api: ApiReader, exchange: Exchange) -> tuple[Answer | None, tuple[str, ...]]:
    """The answer to a model call, and notes on what could not be read; None when no
    answer came at all."""
    response = exchange.recorded.response
    body = response_body(exchange)
    if response is None or body is None:
        return None, (
            f"no answer came ({exchange.recorded.error or exchange.recorded.outcome.value})",
        )
    notes = [body.note] if body.note else []
    kind = media_type(response.headers)
    streamed = kind == "text/event-stream" or (
        not kind and body.data.lstrip().startswith(_SSE_START)
    )
    if streamed:
        stream = _fed(api, body.data)
        whole, ended, error = stream.whole(), stream.ended, stream.error
        if not ended and body.whole and exchange.recorded.outcome is Outcome.COMPLETE:
            notes.append(f"the stream ended without {stream.end_marker}")
    elif eventstream.is_event_stream(kind) or _is_json_array(kind, body.data):
        # Bedrock's event stream, or Gemini's stream as one JSON array of whole answers.
        streamed = True
        stream = api.stream()
        if eventstream.is_event_stream(kind):
            events, damage = eventstream.json_events(body.data)
            if damage is not None and body.whole:
                notes.append(f"the event stream is {damage}")
        else:
            events = [as_dict(item) for item in _items(parse_json(body.data))]
        for event in events:
            if event:
                stream.feed(event)
        whole, ended, error = stream.whole(), stream.ended, stream.error
        if not ended and body.whole and exchange.recorded.outcome is Outcome.COMPLETE:
            notes.append(f"the stream ended without {stream.end_marker}")
    else:
        value = parse_json(body.data)
        whole = as_dict(value)
        arrived = exchange.recorded.outcome is Outcome.COMPLETE
        ended, error = bool(whole) or arrived, error_text(value)
        if body.data and not whole and body.whole and arrived:
            notes.append("the answer is not a JSON object")
    if response.status >= 400 and error is None:
        error = f"HTTP {response.status} {response.reason}".strip()
    if not ended:
        notes += _outcome_notes(exchange)
    message = api.read_answer(whole)
    headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers)
    view = ResponseView(response.status, headers, body.data, kind)
    found = {**exchange.recorded.facts, **answer_facts(view)}
    answer = Answer(
        status=response.status,
        streamed=streamed,
        complete=ended and body.whole,
        text=message.text,
        parts=message.parts,
        tool_calls=message.tool_calls,
        finish_reason=_text(found, "finish_reason"),
        usage=_usage(found.get("usage")),
        system_fingerprint=_text(found, "system_fingerprint"),
        response_id=_text(found, "response_id"),
        model=_text(found, "answered_model"),
        error=error,
    )
    return answer, tuple(notes)


def reassembled(api: ApiReader, data: bytes) -> dict[str, JsonValue]:
    """A streamed answer (its SSE bytes) as the whole answer the provider would have sent
    unstreamed: what ``resend`` compares, so that a stream's chunking, ids and timing are
    not reported as a difference in what the model said."""
    return _fed(api, data).whole()


def _fed(api: ApiReader, data: bytes) -> Stream:
    stream = api.stream()
    for _, event_data in sse_events(data):
        if event_data.strip() == _DONE:
            stream.done()
            continue
        event = as_dict(parse_json(event_data))
        if event:
            stream.feed(event)
    return stream


def _is_json_array(kind: str, data: bytes) -> bool:
    """A JSON answer that is an array (Gemini's streamGenerateContent without alt=sse)."""
    return kind in ("", "application/json") and data.lstrip()[:1] == b"["


def _items(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _outcome_notes(exchange: Exchange) -> list[str]:
    """Why an answer that did not end was cut: the recorded outcome, in its own words."""
    why = f": {exchange.recorded.error}" if exchange.recorded.error else ""
    if exchange.recorded.outcome is Outcome.TRUNCATED:
        return [f"the connection ended before the answer did{why}"]
    if exchange.recorded.outcome is Outcome.INCOMPLETE:
        return [f"the proxy stopped while the answer was arriving{why}"]
    if exchange.recorded.outcome is Outcome.CLIENT_CLOSED:
        return ["the client closed the connection once it had read what it wanted"]
    return []


def _text(facts: Mapping[str, object], name: str) -> str | None:
    value = facts.get(name)
    return value if isinstance(value, str) else None


def _usage(value: object) -> Mapping[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {name: count for name, count in value.items() if isinstance(count, int)}
