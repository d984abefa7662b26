"""A streamed answer as one message to edit, and that message written back as the same stream.

``edit --set`` on a streamed answer changes the message the stream puts together (the
shape the API gives when not streaming: ``$.choices[0].message.content`` for Chat
Completions, ``$.content[0].text`` for Messages, ``$.output[0].arguments`` for Responses),
so one path means the same whether the agent streamed or not. The message is put together by
the provider's `Stream` (streams.py and the provider modules), and what a stream says only
once (ids, model, ``system_fingerprint``, finish reason, usage) is taken from its events.
The edited message is then written back as the stream it came as: the same event framing,
each part of the content in one delta instead of a few words each, the ids kept, and every
event the SDKs wait for (``[DONE]``; ``message_stop``; ``response.completed``), so the
official SDKs read the edited answer as they read the recorded one.

A stream that did not end, carried an error, or holds what its `Stream` does not keep (a
second choice, citations) is not re-encoded: the edit would silently drop part of it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from freezeframe.canonicalize import sse_events
from freezeframe.providers import anthropic_messages, openai_chat, openai_responses
from freezeframe.providers.apis import READERS
from freezeframe.providers.streams import Stream
from freezeframe.storage import boundedjson

_DONE = b"[DONE]"
KINDS = {
    openai_chat.API: "OpenAI Chat Completions",
    anthropic_messages.API: "Anthropic Messages",
    openai_responses.API: "OpenAI Responses",
}
"""The streams that can be re-encoded, by API, with the name a refusal lists them by."""


class NotRestreamable(ValueError):
    """A stream that cannot be edited as a message; the message names its kind and why."""


@dataclass(frozen=True, slots=True)
class Restream:
    """One recorded stream, read: its message to edit, and how to write a message back."""

    api: str
    message: dict[str, Any]
    """The whole answer, in the shape the API gives when not streaming."""
    encode: Callable[[dict[str, Any]], list[bytes]]
    """The stream's frames (each one SSE event, ready to send) for a message of that shape."""


Event = tuple[str, dict[str, Any]]


def restream(api: str, body: bytes) -> Restream:
    """The recorded stream ``body`` of ``api`` (a profile name), read for an edit.
    Raises NotRestreamable."""
    kind = KINDS.get(api)
    if kind is None:
        names = ", ".join(KINDS.values())
        raise NotRestreamable(
            f"a stream of {api} cannot be re-encoded (only {names} streams can); "
            "replace the whole body with --response-body"
        )
    events, done = _events(body)
    stream = READERS[api].stream()
    for _, event in events:
        stream.feed(event)
    if done:
        stream.done()
    _check(kind, stream)
    if api == openai_chat.API:
        return _chat(events, stream, done)
    if api == anthropic_messages.API:
        return _messages(events, stream)
    return _responses(events, named=any(name for name, _ in events))


def _events(body: bytes) -> tuple[list[Event], bool]:
    """The stream's JSON events and whether ``[DONE]`` came; an event cut off at the end is
    left to the end check."""
    events: list[Event] = []
    done = False
    found = list(sse_events(body))
    for at, (name, data) in enumerate(found):
        if data.strip() == _DONE:
            done = True
            continue
        try:
            value = boundedjson.loads(data)
        except ValueError:
            if at == len(found) - 1:
                break
            raise NotRestreamable(f"an event of the stream is not JSON: {data[:60]!r}") from None
        if isinstance(value, dict):
            events.append((name, value))
    return events, done


def _check(kind: str, stream: Stream) -> None:
    if stream.error is not None:
        raise NotRestreamable(f"the {kind} stream carries an error ({stream.error})")
    if not stream.ended:
        raise NotRestreamable(f"the {kind} stream ended without {stream.end_marker}")


def _frame(event: dict[str, Any], name: str | None = None) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()


# -- OpenAI Chat Completions (openai/types/chat/chat_completion_chunk.py) --

_CHUNK_IDS = ("id", "created", "model", "system_fingerprint", "service_tier")


def _chat(events: list[Event], stream: Stream, done: bool) -> Restream:
    chunks = [event for _, event in events]
    if any(c.get("index", 0) != 0 for chunk in chunks for c in _list(chunk.get("choices"))):
        raise NotRestreamable("the OpenAI Chat Completions stream has several choices")
    ids: dict[str, Any] = {}
    for chunk in chunks:
        ids |= {n: chunk[n] for n in _CHUNK_IDS if chunk.get(n) is not None and n not in ids}
    finish = None
    usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in _list(chunk.get("choices")):
            finish = choice.get("finish_reason") or finish
    recorded = dict(_dict(_dict(_list(stream.whole().get("choices"))[0]).get("message")))
    if not recorded.get("tool_calls"):
        recorded.pop("tool_calls", None)
    message = {"role": "assistant", **recorded}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    answer = {**ids, "object": "chat.completion", "choices": [choice]}
    if usage is not None:
        answer["usage"] = usage
    per_chunk_usage = bool(chunks) and "usage" in chunks[0]
    usage_chunk = any(chunk.get("choices") == [] and chunk.get("usage") for chunk in chunks)

    def encode(edited: dict[str, Any]) -> list[bytes]:
        base = {name: edited[name] for name in _CHUNK_IDS if name in edited}
        base["object"] = "chat.completion.chunk"
        first = _dict(_list(edited.get("choices"))[0] if _list(edited.get("choices")) else {})
        said = _dict(first.get("message"))

        def chunk(delta: dict[str, Any], finish: Any = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            event = {**base, "choices": [choice]}
            if per_chunk_usage:
                event["usage"] = None
            if finish is not None and usage is not None and not usage_chunk:
                event["usage"] = edited.get("usage")  # servers that send it with the finish
            return _frame(event)

        deltas: list[dict[str, Any]] = [
            {"role": said.get("role", "assistant"), "content": "", "refusal": None}
        ]
        for name in ("content", "refusal"):
            if isinstance(said.get(name), str) and said[name]:
                deltas.append({name: said[name]})
        for index, call in enumerate(_list(said.get("tool_calls"))):
            deltas.append({"tool_calls": [{"index": index, **_dict(call)}]})
        if said.get("function_call"):
            deltas.append({"function_call": said["function_call"]})
        frames = [chunk(delta) for delta in deltas]
        frames.append(chunk({}, first.get("finish_reason")))
        if usage_chunk:
            frames.append(_frame({**base, "choices": [], "usage": edited.get("usage")}))
        if done:
            frames.append(b"data: [DONE]\n\n")
        return frames

    return Restream(openai_chat.API, answer, encode)


# -- Anthropic Messages (anthropic/types/raw_message_stream_event.py) --

_DELTAS = {"text_delta", "input_json_delta", "thinking_delta", "signature_delta"}
_STREAMED_BLOCKS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "text": ("text", "text_delta", {"text": ""}),
    "thinking": ("thinking", "thinking_delta", {"thinking": "", "signature": ""}),
    "tool_use": ("input", "input_json_delta", {"input": {}}),
    "server_tool_use": ("input", "input_json_delta", {"input": {}}),
}
"""Per block type: the field its deltas carry, their type, and what its start holds."""


def _messages(events: list[Event], stream: Stream) -> Restream:
    answer, events_of = messages_events(events, stream)

    def encode(edited: dict[str, Any]) -> list[bytes]:
        return [_frame(event, event["type"]) for event in events_of(edited)]

    return Restream(anthropic_messages.API, answer, encode)


def messages_events(
    events: list[Event], stream: Stream
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], list[dict[str, Any]]]]:
    """A Messages stream's whole message, and how to write a message back as its events
    (framed as SSE here; as Bedrock's chunks by whatif.reframe)."""
    start: dict[str, Any] = {}
    delta: dict[str, Any] = {}
    delta_usage: dict[str, Any] = {}
    for _, event in events:
        kind = event.get("type")
        if kind == "message_start":
            start = _dict(event.get("message"))
        elif kind == "message_delta":
            delta = _dict(event.get("delta"))
            delta_usage = _dict(event.get("usage"))
        elif kind == "content_block_delta":
            found = _dict(event.get("delta")).get("type")
            if found not in _DELTAS:
                raise NotRestreamable(f"the Anthropic Messages stream carries {found} deltas")
    blocks = []
    for block in _list(stream.whole().get("content")):
        if block.get("type") in ("tool_use", "server_tool_use"):
            block = {**block, "input": _input(block.get("input"))}
        blocks.append(block)
    usage = {**_dict(start.get("usage")), **delta_usage}
    answer = {**start, "content": blocks, **delta, "usage": usage}
    start_usage = start.get("usage")

    def events_of(edited: dict[str, Any]) -> list[dict[str, Any]]:
        head = {**edited, "content": [], "stop_reason": None, "stop_sequence": None}
        if start_usage is not None:
            head["usage"] = start_usage
        out: list[dict[str, Any]] = [{"type": "message_start", "message": head}]
        for index, block in enumerate(_list(edited.get("content"))):
            out += _block_events(index, _dict(block))
        wanted = _dict(edited.get("usage"))
        stop = {name: edited.get(name) for name in ("stop_reason", "stop_sequence")}
        usage = {name: wanted.get(name, value) for name, value in delta_usage.items()}
        out.append({"type": "message_delta", "delta": stop, "usage": usage})
        out.append({"type": "message_stop"})
        return out

    return answer, events_of


def _input(value: Any) -> Any:
    """A streamed tool_use's input is its joined JSON text: the object it spells."""
    if not isinstance(value, str):
        return value
    try:
        return boundedjson.loads(value) if value else {}
    except ValueError:
        raise NotRestreamable(f"a tool_use input is not JSON: {value[:60]!r}") from None


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One content block as Anthropic streams it: started empty, its content in one delta
    (a thinking block's signature in a second), stopped; a block that has no deltas (a
    redacted thinking, a server tool's result) starts whole."""
    streamed = _STREAMED_BLOCKS.get(str(block.get("type")))
    if streamed is None:
        yield {"type": "content_block_start", "index": index, "content_block": block}
    else:
        field, kind, empty = streamed
        yield {"type": "content_block_start", "index": index, "content_block": {**block, **empty}}
        value = block.get(field)
        piece = json.dumps(value, ensure_ascii=False) if field == "input" else value
        if piece:
            delta = {"type": kind, "partial_json" if field == "input" else field: piece}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        if block.get("type") == "thinking" and block.get("signature"):
            delta = {"type": "signature_delta", "signature": block["signature"]}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


# -- OpenAI Responses (openai/types/responses/response_stream_event.py) --

_ENDS = ("response.completed", "response.incomplete", "response.failed")


def _responses(events: list[Event], *, named: bool) -> Restream:
    ending = [event for _, event in events if event.get("type") in _ENDS]
    final = _dict(ending[-1].get("response")) if ending else {}
    if not final:
        raise NotRestreamable("the OpenAI Responses stream's last event holds no response")
    end = str(ending[-1]["type"])
    opening = []
    for _, event in events:
        if str(event.get("type")).startswith("response.output_item"):
            break
        opening.append(event)

    def encode(edited: dict[str, Any]) -> list[bytes]:
        out: list[dict[str, Any]] = [copy.deepcopy(event) for event in opening]
        for at, item in enumerate(_list(edited.get("output"))):
            out += _item_events(at, _dict(item))
        out.append({"type": end, "response": edited})
        for number, event in enumerate(out):
            if "sequence_number" in events[0][1]:
                event["sequence_number"] = number
        return [_frame(event, event["type"] if named else None) for event in out]

    return Restream(openai_responses.API, final, encode)


def _item_events(at: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One output item as the Responses API streams it: added (empty where it streams),
    its text parts and arguments in one delta each, done."""
    kind = item.get("type")
    where = {"output_index": at, "item_id": item.get("id")}
    if kind == "message":
        yield {
            "type": "response.output_item.added",
            "output_index": at,
            "item": {**item, "content": [], "status": "in_progress"},
        }
        for index, part in enumerate(_list(item.get("content"))):
            yield from _part_events(where | {"content_index": index}, _dict(part))
    elif kind == "function_call":
        arguments = item.get("arguments") or ""
        yield {
            "type": "response.output_item.added",
            "output_index": at,
            "item": {**item, "arguments": "", "status": "in_progress"},
        }
        yield {"type": "response.function_call_arguments.delta", **where, "delta": arguments}
        yield {
            "type": "response.function_call_arguments.done",
            **where,
            "name": item.get("name"),
            "arguments": arguments,
        }
    else:
        yield {"type": "response.output_item.added", "output_index": at, "item": item}
    yield {"type": "response.output_item.done", "output_index": at, "item": item}


def _part_events(where: dict[str, Any], part: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = part.get("type")
    field, stem = ("refusal", "refusal") if kind == "refusal" else ("text", "output_text")
    text = part.get(field) or ""
    yield {"type": "response.content_part.added", **where, "part": {**part, field: ""}}
    extra: dict[str, Any] = {} if kind == "refusal" else {"logprobs": []}
    yield {"type": f"response.{stem}.delta", **where, "delta": text, **extra}
    yield {"type": f"response.{stem}.done", **where, field: text, **extra}
    yield {"type": "response.content_part.done", **where, "part": part}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
