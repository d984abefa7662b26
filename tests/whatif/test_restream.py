"""A streamed answer edited with --set is streamed again so that the official SDKs, streaming,
read the edited message, with the recorded ids kept; a stream that cannot be re-encoded is
refused in one line naming its kind."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from support.exchanges import changed, stored_exchange
from support.streams import anthropic_stream, chat_stream, responses_stream, sse

from freezeframe.canonicalize import KeyConfig
from freezeframe.storage import Chunk, Exchange
from freezeframe.whatif.editing import AnswerEdit, Assignment, EditError, edited

SSE = ((b"content-type", b"text/event-stream; charset=utf-8"),)


def streamed(url: str, body: bytes) -> Exchange:
    exchange = stored_exchange(
        seq=3,
        url=url,
        request_body=b'{"model": "m", "stream": true}',
        response_headers=SSE,
        response_body=body,
    )
    chunks = (Chunk(0, 0.25), Chunk(len(body) // 2, 0.5), Chunk(len(body) - 1, 1.25))
    assert exchange.recorded.response is not None
    response = dataclasses.replace(exchange.recorded.response, chunks=chunks, first_byte_at=0.25)
    return changed(exchange, response=response)


def edit(exchange: Exchange, *sets: str) -> bytes:
    change = AnswerEdit(sets=tuple(Assignment.parse(text) for text in sets))
    made = edited(exchange, change, KeyConfig())
    assert made.response.chunks[0].at == 0.25 and made.response.chunks[-1].at == 1.25
    ats = [chunk.at for chunk in made.response.chunks]
    gaps = {round(later - earlier, 9) for earlier, later in zip(ats, ats[1:], strict=False)}
    assert len(ats) > 2 and len(gaps) == 1, "spread evenly, first byte to end"
    offsets = [chunk.offset for chunk in made.response.chunks]
    frames = [made.response.body[a:b] for a, b in zip(offsets, [*offsets[1:], None], strict=False)]
    assert all(frame.endswith(b"\n\n") for frame in frames), "one whole event per chunk"
    return made.response.body


def transport(body: bytes) -> httpx2.MockTransport:
    headers = {"content-type": "text/event-stream"}
    return httpx2.MockTransport(lambda request: httpx2.Response(200, headers=headers, content=body))


def openai_client(body: bytes) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(transport=transport(body))
    return openai.OpenAI(api_key="sk-test", base_url="https://api.test/v1", http_client=http)


def chat_text_stream() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 1790000000,
            "model": "gpt-4o-2026-01",
            "system_fingerprint": "fp_orders",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": word}) for word in ("Your ", "order ", "is ", "late.")]
    events.append(chunk({}, "stop"))
    return sse(*events, named=False) + b"data: [DONE]\n\n"


def test_chat_text_edited_is_what_the_openai_sdk_streams() -> None:
    body = edit(
        streamed("https://api.openai.com/v1/chat/completions", chat_text_stream()),
        '$.choices[0].message.content="Your order ord_8821 is processing."',
    )
    assert body.endswith(b"data: [DONE]\n\n") and b"event:" not in body
    with openai_client(body) as client:
        chunks = list(client.chat.completions.create(model="m", messages=[], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Your order ord_8821 is processing."
    assert {(c.id, c.model, c.system_fingerprint) for c in chunks} == {
        ("chatcmpl-9", "gpt-4o-2026-01", "fp_orders")
    }
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_chat_tool_arguments_edited_are_what_the_openai_sdk_accumulates() -> None:
    exchange = streamed(
        "https://api.openai.com/v1/chat/completions", chat_stream(['{"ci', 'ty": "Par', 'is"}'])
    )
    body = edit(
        exchange, '$.choices[0].message.tool_calls[0].function.arguments="{\\"city\\": \\"Oslo\\"}"'
    )
    with openai_client(body) as client:
        with client.chat.completions.stream(model="m", messages=[]) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (  # type: ignore[union-attr]
        "call_1", "f", {"city": "Oslo"}
    )  # fmt: skip
    assert final.choices[0].finish_reason == "tool_calls"


def test_anthropic_tool_input_and_text_edited_are_what_the_anthropic_sdk_reads() -> None:
    exchange = streamed(
        "https://api.anthropic.com/v1/messages", anthropic_stream(['{"city"', ': "Paris"}'])
    )
    body = edit(exchange, '$.content[0].input={"city": "Oslo"}', '$.stop_reason="end_turn"')
    http = anthropic.DefaultHttpxClient(transport=transport(body))
    with anthropic.Anthropic(api_key="k", base_url="https://api.test", http_client=http) as client:
        with client.messages.stream(model="m", max_tokens=5, messages=[]) as stream:
            message = stream.get_final_message()
    assert (message.id, message.model, message.stop_reason) == (
        "msg_1", "claude-sonnet-4-20250514", "end_turn"
    )  # fmt: skip
    block = message.content[0]
    assert block.type == "tool_use" and block.input == {"city": "Oslo"} and block.id == "toolu_1"
    assert message.usage.output_tokens == 9


def test_responses_call_arguments_edited_are_what_the_openai_sdk_reads() -> None:
    exchange = streamed(
        "https://api.openai.com/v1/responses", responses_stream(['{"city":', '"Paris"}'])
    )
    body = edit(exchange, '$.output[0].arguments="{\\"city\\":\\"Oslo\\"}"')
    with openai_client(body) as client:
        with client.responses.stream(model="m", input="weather?") as stream:
            deltas = [e.delta for e in stream if e.type == "response.function_call_arguments.delta"]
            final = stream.get_final_response()
    assert "".join(deltas) == '{"city":"Oslo"}'
    call = final.output[0]
    assert call.type == "function_call" and call.arguments == '{"city":"Oslo"}'
    assert final.id == "resp_1"


def test_a_stream_of_another_kind_is_refused_in_one_line_naming_it() -> None:
    exchange = streamed("https://api.example.com/events", b'data: {"tick": 1}\n\n')
    with pytest.raises(EditError) as refused:
        edit(exchange, "$.tick=2")
    message = str(refused.value)
    assert "\n" not in message and "c#3" in message
    assert "a stream of" in message and "cannot be re-encoded" in message


def test_a_cut_off_stream_is_refused_rather_than_completed() -> None:
    whole = chat_text_stream()
    exchange = streamed("https://api.openai.com/v1/chat/completions", whole[: len(whole) // 2])
    with pytest.raises(EditError, match="ended without"):
        edit(exchange, '$.choices[0].message.content="x"')


def test_anthropic_thinking_keeps_its_signature_when_the_text_after_it_is_edited() -> None:
    start = {
        "id": "msg_7",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    thinking = {"type": "thinking", "thinking": "", "signature": ""}

    def delta(index: int, **fields: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    events = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        delta(0, type="thinking_delta", thinking="Hm."),
        delta(0, type="signature_delta", signature="c2ln"),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        delta(1, type="text_delta", text="Late."),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    exchange = streamed("https://api.anthropic.com/v1/messages", sse(*events))
    body = edit(exchange, '$.content[1].text="On time."')
    http = anthropic.DefaultHttpxClient(transport=transport(body))
    with anthropic.Anthropic(api_key="k", base_url="https://api.test", http_client=http) as client:
        with client.messages.stream(model="m", max_tokens=5, messages=[]) as stream:
            message = stream.get_final_message()
    first, second = message.content
    assert first.type == "thinking" and (first.thinking, first.signature) == ("Hm.", "c2ln")
    assert second.type == "text" and second.text == "On time."
    assert (message.id, message.stop_reason, message.usage.output_tokens) == (
        "msg_7",
        "end_turn",
        7,
    )


def test_chat_usage_chunk_is_kept_and_follows_an_edit_of_the_usage() -> None:
    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None) -> dict[str, Any]:
        return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": choices, "usage": usage}  # fmt: skip

    events = [
        chunk([{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}], None),
        chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}], None),
        chunk([], {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}),
    ]
    exchange = streamed(
        "https://api.openai.com/v1/chat/completions",
        sse(*events, named=False) + b"data: [DONE]\n\n",
    )
    body = edit(
        exchange, '$.choices[0].message.content="Hello there"', "$.usage.completion_tokens=2"
    )
    with openai_client(body) as client:
        chunks = list(client.chat.completions.create(model="m", messages=[], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 2
    assert all(c.usage is None for c in chunks[:-1])
