"""Replay-kit facts, read from requests the real SDKs send and answers shaped by their types.

Answers are built from the SDKs' own response models, or written to the documented wire
format where an SDK has none, and wherever an SDK sent the request the answer is handed back
to it, so the test also shows that the SDK accepts what the facts were read from.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import (
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from anthropic.types.shared import ErrorResponse
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import BaseModel
from support.sdk_capture import SdkCapture, view_of

from freezeframe.canonicalize import (
    FACT_NAMES,
    FACTS_BODY_LIMIT,
    RequestView,
    ResponseView,
    canonicalize,
    facts_of,
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def traceparent(trace_id: str = TRACE_ID, span_id: str = SPAN_ID) -> str:
    """A traceparent as OpenTelemetry's own W3C propagator writes it for an agent's span."""
    span = NonRecordingSpan(SpanContext(int(trace_id, 16), int(span_id, 16), False, TraceFlags(1)))
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=set_span_in_context(span))
    return carrier["traceparent"]


def sent(
    path: str,
    body: bytes = b"",
    content_type: str = "application/json",
    headers: tuple[tuple[str, str], ...] = (),
) -> RequestView:
    """A request written out by hand, for APIs no SDK here speaks."""
    return RequestView("POST", "http", "127.0.0.1", 8000, path, (), headers, body, content_type)


class Wire(SdkCapture):
    """SDK clients answered with one prepared answer; the facts read from that exchange."""

    def __init__(
        self,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    ) -> None:
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
        self.answer = ResponseView(
            status, (("content-type", content_type), *pairs), body, content_type
        )
        super().__init__()

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        assert self.answer.body is not None
        return httpx2.Response(
            self.answer.status, headers=list(self.answer.headers), content=self.answer.body
        )

    def facts(self) -> dict[str, Any]:
        return facts_of(view_of(self.requests[-1]), self.answer)


def sse(*events: BaseModel | dict[str, Any], named: bool = True, done: bool = False) -> bytes:
    """A text/event-stream body; named events carry `event: <type>` as Anthropic and the
    Responses API send them, unnamed ones are bare `data:` lines as chat chunks are."""
    out = []
    for event in events:
        data = event.model_dump_json() if isinstance(event, BaseModel) else json.dumps(event)
        kind = json.loads(data)["type"] if named else None
        out.append((f"event: {kind}\n" if kind else "") + f"data: {data}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


CHAT = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "What is 2+2?"}],
    "temperature": 0.2,
    "top_p": 0.9,
    "seed": 7,
    "max_completion_tokens": 64,
}

CHAT_USAGE = {
    "prompt_tokens": 14,
    "completion_tokens": 2,
    "total_tokens": 16,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
FLAT_CHAT_USAGE = {
    "prompt_tokens": 14,
    "completion_tokens": 2,
    "total_tokens": 16,
    "prompt_tokens_details.cached_tokens": 0,
    "prompt_tokens_details.audio_tokens": 0,
    "completion_tokens_details.reasoning_tokens": 0,
    "completion_tokens_details.audio_tokens": 0,
}

OPENAI_LIMITS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-reset-requests": "120ms",
    "x-ratelimit-limit-tokens": "30000",
    "x-ratelimit-remaining-tokens": "29980",
    "x-ratelimit-reset-tokens": "40ms",
}


def test_chat_completion() -> None:
    answer = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4o-2024-08-06",
            "system_fingerprint": "fp_fc9f1d7035",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "4"},
                    "finish_reason": "stop",
                }
            ],
            "usage": CHAT_USAGE,
        }
    )
    headers = {"x-request-id": "req_8d1f", **OPENAI_LIMITS}
    wire = Wire(answer.model_dump_json().encode(), headers=headers)
    completion = wire.openai.chat.completions.create(
        **CHAT, extra_headers={"traceparent": traceparent()}
    )

    assert completion.choices[0].message.content == "4"
    assert wire.facts() == {
        "provider": "openai",
        "api": "openai.chat-completions",
        "stream": False,
        "model": "gpt-4o",
        "answered_model": "gpt-4o-2024-08-06",
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "max_tokens": 64,
        "system_fingerprint": "fp_fc9f1d7035",
        "response_id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "request_id": "req_8d1f",
        "usage": FLAT_CHAT_USAGE,
        "finish_reason": "stop",
        "rate_limits": OPENAI_LIMITS,
        "trace_id": TRACE_ID,
        "parent_span_id": SPAN_ID,
    }


def chat_stream() -> bytes:
    """A streamed chat answer with `stream_options.include_usage`: usage null on every chunk
    but a last one with no choices, as the Chat Completions streaming reference shows."""
    base = {
        "id": "chatcmpl-stream1",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_06737a9306",
    }
    deltas: list[tuple[dict[str, Any], str | None]] = [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "2+2"}, None),
        ({"content": " is 4."}, None),
        ({}, "stop"),
    ]
    chunks = [
        ChatCompletionChunk.model_validate(
            base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        )
        for delta, finish in deltas
    ]
    chunks.append(ChatCompletionChunk.model_validate(base | {"choices": [], "usage": CHAT_USAGE}))
    return sse(*chunks, named=False, done=True)


def test_streamed_chat_completion_with_usage() -> None:
    wire = Wire(chat_stream(), content_type="text/event-stream; charset=utf-8")
    stream = wire.openai.chat.completions.create(
        **(CHAT | {"model": "gpt-4o-mini"}),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    assert chunks[-1].usage is not None
    assert wire.facts() == {
        "provider": "openai",
        "api": "openai.chat-completions",
        "model": "gpt-4o-mini",
        "answered_model": "gpt-4o-mini-2024-07-18",
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "max_tokens": 64,
        "stream": True,
        "system_fingerprint": "fp_06737a9306",
        "response_id": "chatcmpl-stream1",
        "usage": FLAT_CHAT_USAGE,
        "finish_reason": "stop",
    }


def test_a_stream_cut_mid_way_keeps_what_arrived() -> None:
    whole = chat_stream()
    cut = whole[: whole.index(b'"usage":{') + 20]
    wire = Wire(cut, content_type="text/event-stream")
    stream = wire.openai.chat.completions.create(
        **CHAT, stream=True, stream_options={"include_usage": True}
    )

    assert [chunk.usage for chunk in stream][-1] is None
    facts = wire.facts()
    assert facts["response_id"] == "chatcmpl-stream1"
    assert facts["finish_reason"] == "stop"
    assert "usage" not in facts


def response_object(**changes: Any) -> Response:
    return Response.model_validate(
        {
            "id": "resp_67ccd2bed1ec8190b14f964abc054267",
            "object": "response",
            "created_at": 1741476542,
            "status": "completed",
            "model": "gpt-4.1-2025-04-14",
            "output": [
                {
                    "type": "message",
                    "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "4", "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 36,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": 2,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 38,
            },
        }
        | changes
    )


RESPONSES_USAGE = {
    "input_tokens": 36,
    "input_tokens_details.cached_tokens": 0,
    "input_tokens_details.cache_write_tokens": 0,
    "output_tokens": 2,
    "output_tokens_details.reasoning_tokens": 0,
    "total_tokens": 38,
}


def test_streamed_responses_api() -> None:
    created = response_object(status="in_progress", output=[], usage=None)
    events = [
        ResponseCreatedEvent(type="response.created", sequence_number=0, response=created),
        ResponseTextDeltaEvent(
            type="response.output_text.delta",
            sequence_number=1,
            item_id="msg_67ccd2bf17f0819081ff3bb2cf6508e6",
            output_index=0,
            content_index=0,
            delta="4",
            logprobs=[],
        ),
        ResponseCompletedEvent(
            type="response.completed", sequence_number=2, response=response_object()
        ),
    ]
    wire = Wire(sse(*events), content_type="text/event-stream", headers={"x-request-id": "req_r"})
    stream = wire.openai.responses.create(
        model="gpt-4.1", input="What is 2+2?", max_output_tokens=50, stream=True
    )

    assert [event.type for event in stream][-1] == "response.completed"
    assert wire.facts() == {
        "provider": "openai",
        "api": "openai.responses",
        "model": "gpt-4.1",
        "answered_model": "gpt-4.1-2025-04-14",
        "max_tokens": 50,
        "stream": True,
        "response_id": "resp_67ccd2bed1ec8190b14f964abc054267",
        "request_id": "req_r",
        "usage": RESPONSES_USAGE,
        "finish_reason": "completed",
    }


def test_an_incomplete_response_names_why() -> None:
    answer = response_object(
        status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    wire = Wire(answer.model_dump_json().encode())
    assert wire.openai.responses.create(model="gpt-4.1", input="Hi").status == "incomplete"

    assert wire.facts()["finish_reason"] == "max_output_tokens"


def test_embeddings() -> None:
    answer = CreateEmbeddingResponse.model_validate(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.0023, -0.0093]}],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        }
    )
    wire = Wire(answer.model_dump_json().encode(), headers={"x-request-id": "req_e"})
    wire.openai.embeddings.create(model="text-embedding-3-small", input="The food was good")

    assert wire.facts() == {
        "provider": "openai",
        "api": "openai.embeddings",
        "model": "text-embedding-3-small",
        "answered_model": "text-embedding-3-small",
        "request_id": "req_e",
        "usage": {"prompt_tokens": 8, "total_tokens": 8},
    }


MESSAGES: dict[str, Any] = {
    "model": "claude-haiku-4-5",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "Hello"}],
}
ANTHROPIC_LIMITS = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2025-10-01T12:00:01Z",
    "anthropic-ratelimit-input-tokens-remaining": "39000",
}


def anthropic_message(**changes: Any) -> Message:
    return Message.model_validate(
        {
            "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5-20251001",
            "content": [{"type": "text", "text": "Hi! How can I help?"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 8,
                "output_tokens": 12,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                "service_tier": "standard",
            },
        }
        | changes
    )


def test_anthropic_message() -> None:
    headers = {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **ANTHROPIC_LIMITS}
    wire = Wire(anthropic_message().model_dump_json().encode(), headers=headers)
    # The API takes temperature and top_p, though this SDK's types no longer list them.
    message = wire.anthropic.messages.create(
        **MESSAGES, extra_body={"temperature": 1, "top_p": 0.5}
    )

    assert message.stop_reason == "end_turn"
    assert wire.facts() == {
        "provider": "anthropic",
        "api": "anthropic.messages",
        "stream": False,
        "model": "claude-haiku-4-5",
        "answered_model": "claude-haiku-4-5-20251001",
        "temperature": 1.0,
        "top_p": 0.5,
        "max_tokens": 1024,
        "response_id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        "usage": {
            "input_tokens": 8,
            "output_tokens": 12,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation.ephemeral_5m_input_tokens": 0,
            "cache_creation.ephemeral_1h_input_tokens": 0,
        },
        "finish_reason": "end_turn",
        "rate_limits": ANTHROPIC_LIMITS,
    }


def anthropic_stream_start() -> list[BaseModel | dict[str, Any]]:
    """The events up to the first text, as the Messages streaming reference lists them."""
    started = anthropic_message(
        content=[], stop_reason=None, usage={"input_tokens": 25, "output_tokens": 1}
    )
    return [
        RawMessageStartEvent(type="message_start", message=started),
        RawContentBlockStartEvent(
            type="content_block_start", index=0, content_block={"type": "text", "text": ""}
        ),
        {"type": "ping"},
        RawContentBlockDeltaEvent(
            type="content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi!"}
        ),
    ]


def test_streamed_anthropic_message_merges_usage() -> None:
    events = [
        *anthropic_stream_start(),
        RawContentBlockStopEvent(type="content_block_stop", index=0),
        RawMessageDeltaEvent(
            type="message_delta",
            delta={"stop_reason": "max_tokens", "stop_sequence": None},
            usage={"output_tokens": 15},
        ),
        RawMessageStopEvent(type="message_stop"),
    ]
    wire = Wire(sse(*events), content_type="text/event-stream", headers={"request-id": "req_s"})
    with wire.anthropic.messages.stream(**MESSAGES) as stream:
        final = stream.get_final_message()

    facts = wire.facts()
    assert facts["usage"] == {"input_tokens": 25, "output_tokens": 15}
    assert facts["usage"] == {
        "input_tokens": final.usage.input_tokens,
        "output_tokens": final.usage.output_tokens,
    }
    assert facts["finish_reason"] == final.stop_reason == "max_tokens"
    assert facts["response_id"] == final.id
    assert facts["answered_model"] == "claude-haiku-4-5-20251001"
    assert facts["stream"] is True
    assert facts["request_id"] == "req_s"


def test_anthropic_overloaded_mid_stream_keeps_what_arrived() -> None:
    error = ErrorResponse.model_validate(
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_011CSHoverload",
        }
    )
    wire = Wire(sse(*anthropic_stream_start(), error), content_type="text/event-stream")
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        with wire.anthropic.messages.stream(**MESSAGES) as stream:
            stream.until_done()

    facts = wire.facts()
    assert facts["response_id"] == "msg_013Zva2CMHLNnXjNJJKqJ2EF"
    assert facts["usage"] == {"input_tokens": 25, "output_tokens": 1}
    assert facts["request_id"] == "req_011CSHoverload"
    assert "finish_reason" not in facts


def test_a_429_with_a_cut_body_still_gives_its_headers() -> None:
    whole = json.dumps(
        {
            "error": {
                "message": "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    ).encode()
    limits = OPENAI_LIMITS | {"x-ratelimit-remaining-tokens": "0", "retry-after": "1"}
    headers = {"x-request-id": "req_429", "retry-after-ms": "1200", **limits}
    wire = Wire(whole[:40], status=429, headers=headers)
    with pytest.raises(openai.RateLimitError):
        wire.openai.chat.completions.create(**CHAT)

    facts = wire.facts()
    assert facts["request_id"] == "req_429"
    assert facts["rate_limits"] == limits | {"retry-after-ms": "1200"}
    assert facts["model"] == "gpt-4o"
    assert not {"response_id", "usage", "finish_reason", "answered_model"} & facts.keys()


def test_an_anthropic_error_body_gives_the_request_id_no_header_gave() -> None:
    error = ErrorResponse.model_validate(
        {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
            "request_id": "req_011CSHbody",
        }
    )
    headers = {"retry-after": "12", **ANTHROPIC_LIMITS}
    wire = Wire(error.model_dump_json().encode(), status=429, headers=headers)
    with pytest.raises(anthropic.RateLimitError):
        wire.anthropic.messages.create(**MESSAGES)

    facts = wire.facts()
    assert facts["request_id"] == "req_011CSHbody"
    assert facts["rate_limits"] == ANTHROPIC_LIMITS | {"retry-after": "12"}


def test_repeated_rate_limit_headers_are_joined() -> None:
    headers = [("RateLimit-Policy", '"burst";q=100;w=60'), ("ratelimit-policy", '"day";q=1000')]
    wire = Wire(b"{}", headers=headers)
    wire.openai.embeddings.create(
        model="text-embedding-3-small", input="x", encoding_format="float"
    )

    assert wire.facts()["rate_limits"] == {"ratelimit-policy": '"burst";q=100;w=60, "day";q=1000'}


# MCP over streamable HTTP: JSON-RPC written per the MCP specification (no MCP SDK here).


def mcp_call(meta: dict[str, str] | None = None) -> RequestView:
    params: dict[str, Any] = {"name": "get_weather", "arguments": {"location": "New York"}}
    if meta is not None:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    headers = (
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-session-id", "1868a90c"),
    )
    return sent("/mcp", json.dumps(body).encode(), headers=headers)


MCP_ANSWER = ResponseView(
    200,
    (("content-type", "text/event-stream"),),
    b'event: message\ndata: {"jsonrpc":"2.0","id":2,"result":{"content":'
    b'[{"type":"text","text":"Sunny"}],"isError":false}}\n\n',
    "text/event-stream",
)


def test_mcp_trace_context_in_meta() -> None:
    facts = facts_of(mcp_call({"traceparent": traceparent()}), MCP_ANSWER)

    assert facts == {
        "provider": "mcp",
        "api": "mcp",
        "trace_id": TRACE_ID,
        "parent_span_id": SPAN_ID,
    }


@pytest.mark.parametrize("profile", [None, "generic.empty"])
def test_a_get_resuming_an_mcp_stream_is_mcp_and_a_plain_sse_get_is_not(
    profile: str | None,
) -> None:
    """The 2025-11-25 resumption: a body-less GET with Last-Event-ID and the session's
    headers. The same GET without MCP's headers (any SSE client reconnecting) stays generic."""
    sse_get = (("accept", "text/event-stream"), ("last-event-id", "5"))
    mcp = (("mcp-session-id", "0073ea66"), ("mcp-protocol-version", "2025-11-25"))
    resumed = replace(sent("/mcp", headers=(*sse_get, *mcp)), method="GET", content_type="")
    plain = replace(resumed, headers=sse_get)
    assert facts_of(resumed, MCP_ANSWER, profile) == {"provider": "mcp", "api": "mcp"}
    assert facts_of(plain, MCP_ANSWER, profile) == {"api": "generic.empty"}
    assert facts_of(replace(resumed, method="DELETE"), None, profile)["api"] == "generic.empty"


def test_mcp_meta_names_the_call_span_over_the_http_header() -> None:
    call = mcp_call({"traceparent": traceparent(span_id="b7ad6b7169203331")})
    header = ("traceparent", traceparent())
    facts = facts_of(replace(call, headers=(*call.headers, header)), None)

    assert facts["parent_span_id"] == "b7ad6b7169203331"


def test_mcp_without_meta_falls_back_to_the_header() -> None:
    call = mcp_call()
    header = ("Traceparent", traceparent())
    facts = facts_of(replace(call, headers=(*call.headers, header)), None)

    assert (facts["trace_id"], facts["parent_span_id"]) == (TRACE_ID, SPAN_ID)


def generic(body: dict[str, Any], path: str = "/api/items") -> RequestView:
    return sent(path, json.dumps(body).encode())


def test_a_generic_json_api_has_no_provider_and_its_answer_is_not_taken_for_a_model() -> None:
    answer = ResponseView(
        201, (("x-request-id", "r-9"),), b'{"id": "item_1", "model": "sedan"}', "application/json"
    )

    assert facts_of(generic({"name": "car"}), answer) == {
        "api": "generic.json",
        "request_id": "r-9",
    }


def test_a_generic_api_naming_a_model_is_read_like_the_api_it_copies() -> None:
    request = generic({"model": "llama3.2", "stream": False, "temperature": 0}, "/llm/chat")
    answer = ResponseView(
        200,
        (),
        b'{"id": "chatcmpl-7", "model": "llama3.2:latest", "choices": '
        b'[{"index": 0, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}',
        "application/json",
    )

    assert facts_of(request, answer) == {
        "api": "generic.json",
        "model": "llama3.2",
        "answered_model": "llama3.2:latest",
        "temperature": 0.0,
        "stream": False,
        "response_id": "chatcmpl-7",
        "usage": {"prompt_tokens": 3},
        "finish_reason": "stop",
    }


def test_a_generic_bytes_body_is_not_read() -> None:
    request = sent("/blob", b"\x89PNG", "image/png")
    answer = ResponseView(200, (), b'{"id": "x", "model": "y"}', "application/json")

    assert facts_of(request, answer) == {"api": "generic.bytes"}


def test_an_upload_given_the_profile_canonicalize_chose_has_the_same_facts() -> None:
    wire = Wire(b"{}", headers={"x-request-id": "req_f"})
    wire.openai.files.create(file=("notes.txt", b"hello"), purpose="assistants")
    upload = view_of(wire.requests[-1])
    profile = canonicalize(upload).profile

    assert profile == "generic.multipart"
    assert facts_of(upload, wire.answer, profile) == wire.facts()
    assert wire.facts() == {"api": "generic.multipart", "request_id": "req_f"}


def test_an_answer_longer_than_the_limit_is_not_read() -> None:
    wire = Wire(b"{}")
    wire.openai.chat.completions.create(**CHAT)
    padding = b" " * FACTS_BODY_LIMIT
    answer = ResponseView(200, (("x-request-id", "req_big"),), b'{"id": "c"}' + padding)

    facts = facts_of(view_of(wire.requests[-1]), answer)
    assert facts["request_id"] == "req_big"
    assert "response_id" not in facts


def test_choices_report_the_first_choice_s_finish_reason() -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        ChatCompletionChunk.model_validate(
            base | {"choices": [{"index": index, "delta": {}, "finish_reason": reason}]}
        )
        for index, reason in ((1, "length"), (0, "tool_calls"))
    ]
    wire = Wire(sse(*chunks, named=False, done=True), content_type="text/event-stream")
    list(wire.openai.chat.completions.create(**CHAT, n=2, stream=True))

    assert wire.facts()["finish_reason"] == "tool_calls"


def test_request_parameters_by_each_api_s_names() -> None:
    wire = Wire(b"{}")
    wire.openai.completions.create(
        model="gpt-3.5-turbo-instruct", prompt="Say hi", max_tokens=5, seed=1, stream=False
    )
    assert {name: wire.facts().get(name) for name in ("max_tokens", "seed", "stream")} == {
        "max_tokens": 5,
        "seed": 1,
        "stream": False,
    }
    wire.openai.chat.completions.create(**(CHAT | {"max_tokens": 9}))
    assert wire.facts()["max_tokens"] == 64


@pytest.mark.parametrize(
    "value",
    [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        f"00-{'0' * 32}-{SPAN_ID}-01",
        f"00-{TRACE_ID}-{'0' * 16}-01",
        f"ff-{TRACE_ID}-{SPAN_ID}-01",
        f"00-{TRACE_ID}-{SPAN_ID}-01-extra",
        f"00-{TRACE_ID}-{SPAN_ID}",
        f"00-{TRACE_ID[:-1]}-{SPAN_ID}-01",
        f"00_{TRACE_ID}_{SPAN_ID}_01",
        "",
    ],
)
def test_an_invalid_traceparent_is_ignored(value: str) -> None:
    wire = Wire(b"{}")
    wire.openai.chat.completions.create(**CHAT, extra_headers={"traceparent": value})

    assert not {"trace_id", "parent_span_id"} & wire.facts().keys()


def test_two_traceparent_headers_are_ambiguous_and_ignored() -> None:
    headers = (("traceparent", traceparent()), ("traceparent", traceparent(span_id="1" * 16)))
    assert facts_of(sent("/", headers=headers), None) == {"api": "generic.empty"}


def test_a_later_traceparent_version_is_read_for_the_fields_it_shares() -> None:
    value = f"01-{TRACE_ID}-{SPAN_ID}-01-what-comes-next"
    assert facts_of(sent("/", headers=(("traceparent", value),)), None)["trace_id"] == TRACE_ID


# Whatever arrives, facts_of answers.

REAL_BODIES = [
    chat_stream(),
    sse(*anthropic_stream_start()),
    anthropic_message().model_dump_json().encode(),
    response_object().model_dump_json().encode(),
]
FACT_KEYS = (
    "id model usage choices index finish_reason stop_reason type message delta response object"
    " status incomplete_details reason request_id system_fingerprint prompt_tokens_details"
    " output_tokens"
).split()
EVENT_TYPES = ["message_start", "message_delta", "error", "response.completed", "response"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(EVENT_TYPES),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(FACT_KEYS) | st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def answer_bodies(draw: st.DrawFn) -> bytes:
    shape = draw(st.sampled_from(["bytes", "json", "sse", "cut"]))
    if shape == "bytes":
        return draw(st.binary(max_size=300))
    if shape == "cut":
        body = draw(st.sampled_from(REAL_BODIES))
        start = draw(st.integers(0, len(body)))
        return body[start : draw(st.integers(start, len(body)))]
    text = json.dumps(draw(json_values)).encode()
    if shape == "sse":
        name = draw(st.sampled_from(["", *EVENT_TYPES, "ping"]))
        return (f"event: {name}\n" if name else "").encode() + b"data: " + text + b"\n\n"
    return text


CONTENT_TYPES = [
    "",
    "application/json",
    "application/x+json",
    "text/event-stream",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=b",
]
PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/mcp", "/v1/embeddings", "/x"]
headers_strategy = st.lists(
    st.tuples(
        st.sampled_from(["traceparent", "x-request-id", "request-id", "x-ratelimit-a"])
        | st.text(max_size=8),
        st.text(max_size=60),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    request_body=st.binary(max_size=200)
    | json_values.map(lambda value: json.dumps(value).encode()),
    request_type=st.sampled_from(CONTENT_TYPES),
    path=st.sampled_from(PATHS),
    request_headers=headers_strategy,
    status=st.integers(100, 599),
    response_headers=headers_strategy,
    response_body=st.none() | answer_bodies(),
    response_type=st.sampled_from(CONTENT_TYPES),
)
def test_facts_of_never_raises_and_knows_only_well_typed_facts(
    request_body: bytes,
    request_type: str,
    path: str,
    request_headers: list[tuple[str, str]],
    status: int,
    response_headers: list[tuple[str, str]],
    response_body: bytes | None,
    response_type: str,
) -> None:
    request = sent(path, request_body, request_type, tuple(request_headers))
    answer = ResponseView(status, tuple(response_headers), response_body, response_type)

    facts = facts_of(request, answer)

    assert facts_of(request, answer, canonicalize(request).profile) == facts
    assert set(facts) <= set(FACT_NAMES)
    for name, value in facts.items():
        if name in ("usage", "rate_limits"):
            assert isinstance(value, dict) and value
            kind = int if name == "usage" else str
            assert all(isinstance(count, kind) for count in value.values())
        else:
            assert isinstance(value, str | int | float | bool), (name, value)


COHERE_REQUEST = {
    "model": "command-a-03-2025",
    "messages": [{"role": "user", "content": "What is 2+2?"}],
    "temperature": 0.3,
    "max_tokens": 64,
}
COHERE_USAGE = {  # cohere/types/usage.py: the counts as billed and as the model counted them
    "billed_units": {"input_tokens": 5, "output_tokens": 2},
    "tokens": {"input_tokens": 71, "output_tokens": 2},
    "cached_tokens": 0,
}
COHERE_FACTS = {
    "provider": "cohere",
    "api": "cohere.chat",
    "model": "command-a-03-2025",
    "temperature": 0.3,
    "max_tokens": 64,
    "response_id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
    "usage": {
        "input_tokens": 71,
        "output_tokens": 2,
        "billed_units.input_tokens": 5,
        "billed_units.output_tokens": 2,
        "cached_tokens": 0,
    },
    "finish_reason": "COMPLETE",
}


def test_cohere_chat_v2_is_cohere_s_with_its_usage_and_finish_reason() -> None:
    """``POST /v2/chat`` was labelled ``generic.json``, its finish reason unread and its usage
    under ``tokens.*`` only, which no token count read (issue 32)."""
    answer = {  # cohere/v2/types/v2chat_response.py
        "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
        "finish_reason": "COMPLETE",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "4"}]},
        "usage": COHERE_USAGE,
    }
    request = sent("/v2/chat", json.dumps(COHERE_REQUEST).encode())
    request = replace(request, host="api.cohere.com")
    whole = ResponseView(200, (), json.dumps(answer).encode(), "application/json")
    assert facts_of(request, whole) == {**COHERE_FACTS, "stream": False}


@pytest.mark.parametrize("named", [True, False])
def test_a_streamed_cohere_chat_v2_answer_says_the_same(named: bool) -> None:
    events = [  # cohere/types/chat_message_start_event.py ... chat_message_end_event.py
        {
            "type": "message-start",
            "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
            "delta": {"message": {"role": "assistant", "content": [], "tool_calls": []}},
        },
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"text": ""}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "4"}}}},
        {"type": "content-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": COHERE_USAGE}},
    ]
    request = sent("/v2/chat", json.dumps({**COHERE_REQUEST, "stream": True}).encode())
    streamed = ResponseView(200, (), sse(*events, named=named), "text/event-stream")
    assert facts_of(request, streamed) == {**COHERE_FACTS, "stream": True}
