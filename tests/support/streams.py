"""Streamed and whole answers built from the SDKs' own types, as the providers send them.

Each builder validates every event with the SDK's model for it, so a test that reads these
reads the wire shape the SDK itself accepts.
"""

from __future__ import annotations

import json
from typing import Any

from anthropic.types import (
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)
from pydantic import BaseModel

__all__ = ["CALL", "RESPONSE", "anthropic_stream", "chat_stream", "responses_stream", "sse"]


def sse(*events: BaseModel | dict[str, Any], named: bool = True) -> bytes:
    """A text/event-stream body; named events carry ``event: <type>``, as Anthropic's and the
    Responses API's do."""
    out = []
    for event in events:
        data = event.model_dump_json() if isinstance(event, BaseModel) else json.dumps(event)
        name = f"event: {json.loads(data)['type']}\n" if named else ""
        out.append(f"{name}data: {data}\n\n")
    return "".join(out).encode()


RESPONSE = {  # a Response (openai/types/responses/response.py), output left to the test
    "id": "resp_1",
    "object": "response",
    "created_at": 1741569952,
    "model": "gpt-4.1-2025-04-14",
    "status": "completed",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 120,
        "output_tokens": 20,
        "total_tokens": 140,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
CALL = {  # a function_call output item
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_abc",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
    "status": "completed",
}


def chat_stream(pieces: list[str]) -> bytes:
    """A chat stream calling ``f`` (id ``call_1``), its arguments sent in these pieces."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        data = ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4o",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        ).model_dump_json(exclude_unset=True)
        return f"data: {data}\n\n".encode()

    function = {"name": "f", "arguments": ""}
    head = {"index": 0, "id": "call_1", "type": "function", "function": function}
    frames = [chunk({"role": "assistant", "tool_calls": [head]})]
    frames += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces
    ]
    frames += [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    return b"".join(frames)


def responses_stream(arguments: list[str], *, finished: bool = True) -> bytes:
    """A Responses stream calling get_weather, its arguments sent in these pieces."""
    whole = "".join(arguments)
    added = {**CALL, "arguments": "", "status": "in_progress"}
    events: list[BaseModel] = [
        ResponseCreatedEvent.model_validate(
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**RESPONSE, "status": "in_progress", "output": []},
            }
        ),
        ResponseOutputItemAddedEvent.model_validate(
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": added,
            }
        ),
    ]
    events += [
        ResponseFunctionCallArgumentsDeltaEvent(
            type="response.function_call_arguments.delta",
            sequence_number=2 + n,
            item_id="fc_1",
            output_index=0,
            delta=piece,
        )
        for n, piece in enumerate(arguments)
    ]
    if finished:
        n = 2 + len(arguments)
        item = {**CALL, "arguments": whole}
        events += [
            ResponseFunctionCallArgumentsDoneEvent.model_validate(
                {
                    "type": "response.function_call_arguments.done",
                    "sequence_number": n,
                    "item_id": "fc_1",
                    "output_index": 0,
                    "arguments": whole,
                    "name": "get_weather",
                }
            ),
            ResponseOutputItemDoneEvent.model_validate(
                {
                    "type": "response.output_item.done",
                    "sequence_number": n + 1,
                    "output_index": 0,
                    "item": item,
                }
            ),
            ResponseCompletedEvent.model_validate(
                {
                    "type": "response.completed",
                    "sequence_number": n + 2,
                    "response": {**RESPONSE, "output": [item]},
                }
            ),
        ]
    return sse(*events)


def anthropic_stream(pieces: list[str]) -> bytes:
    """A Messages stream of one tool_use whose input arrives in these pieces, built from
    the SDK's event types."""
    start = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 1},
        }
    )
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    events: list[BaseModel] = [
        RawMessageStartEvent(type="message_start", message=start),
        RawContentBlockStartEvent.model_validate(
            {"type": "content_block_start", "index": 0, "content_block": block}
        ),
    ]
    events += [
        RawContentBlockDeltaEvent.model_validate(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
        )
        for p in pieces
    ]
    events += [
        RawContentBlockStopEvent(type="content_block_stop", index=0),
        RawMessageDeltaEvent.model_validate(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            }
        ),
        RawMessageStopEvent(type="message_stop"),
    ]
    return sse(*events)
