"""An OpenAI Realtime session as a conversation: what the model was told, and what it said.

A Realtime session is one WebSocket (``GET …/realtime?model=…``, recorded with its
messages, see addons.websocket) carrying JSON events both ways; the conversation is spread
over them. Read in order, as the model met them:

- the client's ``session.update`` (``session.instructions``: the system prompt;
  ``session.tools``), and the server's ``session.created``/``session.updated`` (the model);
- the items that join the conversation: a ``message`` (``role``, ``content`` parts:
  ``input_text``, ``input_audio`` with its ``transcript`` if any) or a
  ``function_call_output`` (``call_id``, ``output``), as the server echoes them
  (``conversation.item.created``, or ``.added``/``.done``), which also shows the speech its
  voice detection committed; the client's ``conversation.item.create`` where the server
  echoes none; and ``conversation.item.input_audio_transcription.completed``, what the user
  said aloud, in the place of the item it transcribes;
- each response: its deltas (``response.output_text.delta``, ``response.text.delta``,
  ``response.output_audio_transcript.delta``, ``response.audio_transcript.delta``,
  ``response.function_call_arguments.done``) and ``response.done``, whose ``response``
  holds the ``output`` items whole, its ``status`` and ``usage``.

The last response is the answer; everything before it (the earlier responses among them)
is what the model had been shown. Audio itself is not text: a part says how much of it there
was. Shapes: openai/types/realtime/ (openai 3.x), GA and beta event names alike.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.canonicalize.realtime import session_key
from freezeframe.providers.answers import Answer
from freezeframe.providers.bodies import as_dict, as_list, as_str, parse_json
from freezeframe.providers.messages import (
    FUNCTION,
    Message,
    Tool,
    ToolCall,
    message,
    tool_call,
    tool_result,
)
from freezeframe.providers.parts import AUDIO, TEXT, Part, content_parts, joined_text
from freezeframe.storage import Exchange
from freezeframe.storage.records import Message as WsMessage

API = "openai.realtime"
_TEXT_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.text.delta",
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
    }
)
_AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
_TRANSCRIBED = "conversation.item.input_audio_transcription.completed"
_ECHOES = frozenset(
    {"conversation.item.created", "conversation.item.added", "conversation.item.done"}
)
"""The server's word for an item joining the conversation (beta ``created``; GA ``added``
then ``done``), typed by the client or heard by the server (voice activity detection)."""


def is_realtime(exchange: Exchange) -> bool:
    """A recorded WebSocket to a path ending in ``/realtime``."""
    path = exchange.recorded.path.split("?", 1)[0].rstrip("/")
    return exchange.recorded.messages is not None and path.endswith("/realtime")


@dataclass(slots=True)
class _Response:
    """One response as its events arrive."""

    id: str | None = None
    text: list[str] = field(default_factory=list)
    audio_bytes: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    done: dict[str, JsonValue] | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """What a Realtime session's events say."""

    model: str | None
    system: str
    tools: tuple[Tool, ...]
    messages: tuple[Message, ...]
    """Every turn before the last response, in order."""
    answer: Answer | None
    """The last response; None when the model never answered."""
    notes: tuple[str, ...]
    key: str
    """``canonicalize.realtime.session_key`` of the client's messages."""


def read_session(exchange: Exchange) -> Session:
    """The session of a recorded Realtime WebSocket (``is_realtime``)."""
    messages: Sequence[WsMessage] = exchange.recorded.messages or ()
    query = parse_qs(urlsplit(exchange.recorded.path).query)
    model: str | None = (query.get("model") or [""])[0] or None
    system = ""
    tools: tuple[Tool, ...] = ()
    turns: list[Message] = []
    responses: list[tuple[int, _Response]] = []  # each with the turn it follows
    current: dict[str, _Response] = {}
    errors: list[str] = []
    events = [(ws, as_dict(parse_json(ws.data)) if ws.text else {}) for ws in messages]
    echoed = any(not ws.from_client and as_str(e.get("type")) in _ECHOES for ws, e in events)
    placed: dict[str, int] = {}  # an echoed item's id, and its turn
    for ws, event in events:
        kind = as_str(event.get("type")) or ""
        if ws.from_client:
            if kind == "session.update":
                session = as_dict(event.get("session"))
                system = as_str(session.get("instructions")) or system
                tools = tuple(_tool(t) for t in as_list(session.get("tools"))) or tools
                model = as_str(session.get("model")) or model
            elif kind == "conversation.item.create" and not echoed:
                turn = _item(as_dict(event.get("item")))
                if turn is not None:
                    turns.append(turn)
            continue
        if kind in ("session.created", "session.updated"):
            session = as_dict(event.get("session"))
            model = as_str(session.get("model")) or model
            system = system or as_str(session.get("instructions")) or ""
        elif kind in _ECHOES:
            item = as_dict(event.get("item"))
            turn = _item(item) if as_str(item.get("role")) != "assistant" else None
            own = as_str(item.get("id"))
            if turn is not None and own is not None and own in placed:
                turns[placed[own]] = turn  # ``.done`` after ``.added``: the item whole
            elif turn is not None:
                placed[own or f"#{len(turns)}"] = len(turns)
                turns.append(turn)
        elif kind == _TRANSCRIBED:
            said = as_str(event.get("transcript")) or ""
            turn = message("user", (Part(AUDIO, f"(spoken) {said}".strip()),))
            own = as_str(event.get("item_id"))
            if own is not None and own in placed:
                turns[placed[own]] = turn
            else:
                turns.append(turn)
        elif kind == "response.created" or kind in _TEXT_DELTAS or kind in _AUDIO_DELTAS:
            answer = _response(current, responses, turns, event, kind)
            if kind in _TEXT_DELTAS:
                answer.text.append(as_str(event.get("delta")) or "")
            elif kind in _AUDIO_DELTAS:
                answer.audio_bytes += _decoded_size(as_str(event.get("delta")) or "")
        elif kind == "response.function_call_arguments.done":
            name = as_str(event.get("name")) or ""
            arguments = as_str(event.get("arguments")) or ""
            call = tool_call(as_str(event.get("call_id")), name, arguments)
            _response(current, responses, turns, event, kind).calls.append(call)
        elif kind == "response.done":
            _response(current, responses, turns, event, kind).done = as_dict(event.get("response"))
        elif kind == "error":
            error = as_dict(event.get("error"))
            errors.append(as_str(error.get("message")) or "error")
    for at, response in reversed(responses):  # earlier answers join the turns they follow
        if response is not responses[-1][1]:
            turns.insert(at, _as_message(response))
    last = responses[-1][1] if responses else None
    notes = [f"the server said: {text}" for text in errors]
    if last is not None and last.done is None:
        notes.append("the last response has no response.done: the session ended before it")
    clients = [(m.text, m.data) for m in messages if m.from_client]
    return Session(
        model=model,
        system=system,
        tools=tools,
        messages=tuple(turns),
        answer=None if last is None else _answer(exchange, last, errors),
        notes=tuple(notes),
        key=session_key(clients),
    )


def _response(
    current: dict[str, _Response],
    responses: list[tuple[int, _Response]],
    turns: list[Message],
    event: dict[str, JsonValue],
    kind: str,
) -> _Response:
    """The response an event belongs to, by its ``response_id`` (or the latest one)."""
    own = as_str(as_dict(event.get("response")).get("id")) or as_str(event.get("response_id"))
    if own is not None and own in current:
        return current[own]
    if own is None and responses and kind != "response.created":
        return responses[-1][1]
    response = _Response(own)
    current[own or f"#{len(responses)}"] = response
    responses.append((len(turns), response))
    return response


def _item(item: dict[str, JsonValue]) -> Message | None:
    kind = as_str(item.get("type")) or "message"
    if kind == "function_call_output":
        output = as_str(item.get("output")) or ""
        result = tool_result(as_str(item.get("call_id")), (Part(TEXT, output),))
        return message("tool", (), (), (result,))
    if kind != "message":
        return None
    parts = []
    for block in as_list(item.get("content")):
        block = as_dict(block)
        if as_str(block.get("type")) == "input_audio":
            said = as_str(block.get("transcript"))
            parts.append(Part(AUDIO, f"(spoken) {said}" if said else "(audio)"))
        else:
            parts += content_parts([block])
    return message(as_str(item.get("role")) or "user", tuple(parts))


def _as_message(response: _Response) -> Message:
    parts, calls = _output(response)
    return message("assistant", parts, calls)


def _output(response: _Response) -> tuple[tuple[Part, ...], tuple[ToolCall, ...]]:
    """A response's parts and calls: from ``response.done``'s output when it has any, else
    from the deltas that came."""
    items = as_list(as_dict(response.done).get("output")) if response.done else []
    if not items:
        parts: tuple[Part, ...] = (Part(TEXT, "".join(response.text)),) if response.text else ()
        if response.audio_bytes:
            parts += (Part(AUDIO, f"(audio, {response.audio_bytes} bytes)"),)
        return parts, tuple(response.calls)
    found: list[Part] = []
    calls: list[ToolCall] = []
    for item in items:
        item = as_dict(item)
        if as_str(item.get("type")) == "function_call":
            arguments = as_str(item.get("arguments")) or ""
            calls.append(tool_call(as_str(item.get("call_id")), _name(item), arguments))
            continue
        for block in as_list(item.get("content")):
            block = as_dict(block)
            transcript = as_str(block.get("transcript"))
            text = as_str(block.get("text"))
            if text is not None or transcript is not None:
                found.append(Part(TEXT, text if text is not None else transcript or ""))
    return tuple(found), tuple(calls)


def _answer(exchange: Exchange, response: _Response, errors: list[str]) -> Answer:
    parts, calls = _output(response)
    done = response.done or {}
    status = as_str(done.get("status"))
    return Answer(
        status=exchange.recorded.response.status if exchange.recorded.response else 0,
        streamed=True,
        complete=response.done is not None,
        text=joined_text(parts),
        parts=parts,
        tool_calls=calls,
        finish_reason=status,
        usage=_usage(as_dict(done.get("usage"))),
        system_fingerprint=None,
        response_id=response.id,
        model=None,
        error=errors[-1] if errors else None,
    )


def _usage(usage: dict[str, JsonValue], prefix: str = "") -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            counts[prefix + name] = value
        elif isinstance(value, dict):
            counts |= _usage(value, f"{prefix}{name}.")
    return counts


def _tool(item: JsonValue) -> Tool:
    tool = as_dict(item)
    kind = as_str(tool.get("type")) or FUNCTION
    return Tool(_name(tool) or kind, kind, as_str(tool.get("description")), tool.get("parameters"))


def _name(item: dict[str, JsonValue]) -> str:
    return as_str(item.get("name")) or ""


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return 0
