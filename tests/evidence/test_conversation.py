"""Conversations read from recorded model calls: requests the official SDKs sent, answers from
the test upstream or built from the SDKs' own types, and each checked against what the SDK
itself made of the same answer."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json

import pytest
from openai.types.responses import Response
from support.exchanges import changed, stored_exchange
from support.recorded import RecordingSdk
from support.streams import CALL, RESPONSE, anthropic_stream, responses_stream
from support.upstream import ENCODERS, Upstream

from freezeframe.evidence.conversation import Conversation, conversation_document, conversation_of
from freezeframe.evidence.steps import Link, Match, agent_steps
from freezeframe.providers.messages import ToolCall, ToolResult
from freezeframe.providers.parts import Part
from freezeframe.storage import BlobRef, Exchange, Outcome

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": "Use tools."},
    {"role": "user", "content": "Paris"},
]


def read(exchange: Exchange) -> Conversation:
    """The conversation, after checking that its document is plain JSON."""
    conversation = conversation_of(exchange)
    assert conversation is not None
    document = conversation_document(conversation)
    assert json.loads(json.dumps(document)) == document
    return conversation


# --- OpenAI Chat Completions ------------------------------------------------------------------


def test_a_chat_call_with_parallel_tool_calls(upstream: Upstream) -> None:
    sdk = RecordingSdk(upstream)
    answer = sdk.openai.chat.completions.create(
        model="gpt-4o", messages=CHAT, tools=[WEATHER, TIME]
    )  # type: ignore[arg-type, list-item]
    conversation = read(sdk.exchanges[0])

    assert (conversation.provider, conversation.api) == ("openai", "openai.chat-completions")
    assert (conversation.model, conversation.stream) == ("gpt-4o", False)
    assert conversation.system == "You are terse.\nUse tools."
    assert [(m.role, m.text) for m in conversation.messages] == [
        ("system", "You are terse."),
        ("developer", "Use tools."),
        ("user", "Paris"),
    ]
    assert [(t.name, t.kind, t.description) for t in conversation.tools] == [
        ("get_weather", "function", "Current weather in a city"),
        ("get_time", "function", None),
    ]
    assert conversation.tools[0].parameters == WEATHER["function"]["parameters"]  # type: ignore[index]
    got = conversation.answer
    assert got is not None and got.complete and not got.streamed
    sdk_calls = answer.choices[0].message.tool_calls or []
    assert [(c.id, c.name, c.arguments) for c in got.tool_calls] == [
        (c.id, c.function.name, c.function.arguments)  # type: ignore[union-attr]
        for c in sdk_calls
    ]
    assert got.tool_calls[0].value == {"city": "Paris"}
    assert (got.finish_reason, got.response_id, got.system_fingerprint) == (
        "tool_calls",
        "chatcmpl-1",
        "fp_1",
    )
    assert got.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert (got.text, got.error, conversation.notes) == ("", None, ())


def test_a_streamed_chat_call_reassembles_each_calls_arguments_from_many_deltas(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    with sdk.openai.chat.completions.stream(
        model="gpt-4o",
        messages=CHAT,  # type: ignore[arg-type]
        tools=[WEATHER, TIME],  # type: ignore[list-item]
        stream_options={"include_usage": True},
    ) as stream:
        final = stream.get_final_completion()
    exchange = sdk.exchanges[0]
    assert exchange.recorded.response is not None
    assert exchange.recorded.response.body.count(b'"arguments":') > 6  # many pieces per call
    conversation = read(exchange)

    got = conversation.answer
    assert conversation.stream and got is not None and got.streamed and got.complete
    sdk_calls = final.choices[0].message.tool_calls or []
    assert [(c.id, c.name, c.arguments, c.value) for c in got.tool_calls] == [
        (c.id, c.function.name, c.function.arguments, {"city": "Paris"})  # type: ignore[union-attr]
        for c in sdk_calls
    ]
    assert len(got.tool_calls) == 2
    assert got.finish_reason == "tool_calls"
    assert got.usage["total_tokens"] == 15
    assert got.model == "gpt-4o" and got.response_id == "chatcmpl-1"


def test_a_chat_request_carrying_tool_results_shows_every_message_by_role(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    first = sdk.openai.chat.completions.create(model="gpt-4o", messages=CHAT, tools=[WEATHER, TIME])  # type: ignore[arg-type, list-item]
    calls = first.choices[0].message.tool_calls or []
    turn = [
        *CHAT,
        first.choices[0].message.model_dump(exclude_none=True),
        *({"role": "tool", "tool_call_id": c.id, "content": f"result of {c.id}"} for c in calls),
    ]
    answer = sdk.openai.chat.completions.create(model="gpt-4o", messages=turn, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    conversation = read(sdk.exchanges[1])

    assert [m.role for m in conversation.messages] == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    assistant = conversation.messages[3]
    assert [c.id for c in assistant.tool_calls] == ["call_1_0", "call_1_1"]
    assert list(conversation.tool_results()) == [
        ToolResult("call_1_0", "result of call_1_0", (Part("text", "result of call_1_0"),)),
        ToolResult("call_1_1", "result of call_1_1", (Part("text", "result of call_1_1"),)),
    ]
    assert conversation.answer is not None
    assert conversation.answer.text == answer.choices[0].message.content
    assert conversation.answer.tool_calls == ()


def test_images_and_files_are_named_not_inlined() -> None:
    picture = base64.b64encode(b"\x89PNG" + bytes(3000)).decode()
    pdf = base64.b64encode(b"%PDF" + bytes(600)).decode()
    sdk = RecordingSdk()
    sdk.prepare(b"{}")
    sdk.openai.chat.completions.create(
        model="gpt-4o",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{picture}"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf}},
                    {"type": "file", "file": {"file_id": "file-abc"}},
                ],
            }
        ],
    )
    conversation = read(sdk.exchanges[0])
    assert conversation.messages[0].parts == (
        Part("text", "What is this?"),
        Part("image", "image/png, 3,004 bytes inline"),
        Part("image", "https://example.com/cat.jpg"),
        Part("file", "report.pdf (data, 604 bytes inline)"),
        Part("file", "file file-abc"),
    )
    assert picture not in json.dumps(conversation_document(conversation))


# --- OpenAI Responses ---------------------------------------------------------------------

RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": WEATHER["function"]["parameters"],  # type: ignore[index]
    "strict": False,
}


def test_a_responses_call_with_instructions_a_function_call_and_its_output() -> None:
    sdk = RecordingSdk()
    answer = Response.model_validate(
        {**RESPONSE, "output": [{**CALL, "call_id": "call_def", "id": "fc_2"}]}
    )
    sdk.prepare(answer.model_dump_json().encode())
    got_sdk = sdk.openai.responses.create(
        model="gpt-4.1",
        instructions="You are terse.",
        input=[
            {"role": "user", "content": "Paris"},
            CALL,  # type: ignore[list-item]
            {"type": "function_call_output", "call_id": "call_abc", "output": "sunny"},
            {"role": "user", "content": [{"type": "input_text", "text": "and tomorrow?"}]},
        ],
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
    )
    conversation = read(sdk.exchanges[0])

    assert (conversation.api, conversation.system) == ("openai.responses", "You are terse.")
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "user"]
    assert conversation.messages[1].tool_calls == (
        ToolCall("call_abc", "get_weather", '{"city":"Paris"}', {"city": "Paris"}),
    )
    assert [(r.call_id, r.text) for r in conversation.tool_results()] == [("call_abc", "sunny")]
    assert conversation.messages[3].text == "and tomorrow?"
    assert [(t.name, t.kind) for t in conversation.tools] == [("get_weather", "function")]
    got = conversation.answer
    assert got is not None and got.complete
    sdk_call = got_sdk.output[0]
    assert [(c.id, c.name, c.arguments) for c in got.tool_calls] == [
        (sdk_call.call_id, sdk_call.name, sdk_call.arguments)  # type: ignore[union-attr]
    ]
    assert (got.finish_reason, got.model, got.response_id) == (
        "completed",
        "gpt-4.1-2025-04-14",
        "resp_1",
    )
    assert conversation.context is not None
    assert (conversation.context.window, conversation.context.used) == (1_047_576, 140)


def test_a_streamed_responses_call_reassembles_the_function_calls_arguments() -> None:
    sdk = RecordingSdk()
    sdk.prepare(
        responses_stream(['{"ci', 'ty":"P', "ari", 's"}']), content_type="text/event-stream"
    )
    with sdk.openai.responses.stream(model="gpt-4.1", input="Paris", tools=[RESPONSES_TOOL]) as s:  # type: ignore[list-item]
        final = s.get_final_response()
    conversation = read(sdk.exchanges[0])
    got = conversation.answer
    assert got is not None and got.streamed and got.complete
    assert [(c.id, c.arguments) for c in got.tool_calls] == [
        (final.output[0].call_id, final.output[0].arguments)  # type: ignore[union-attr]
    ]
    assert [m.text for m in conversation.messages] == ["Paris"]


def test_a_responses_request_continuing_a_stored_response_says_what_it_cannot_show() -> None:
    sdk = RecordingSdk()
    sdk.prepare(Response.model_validate({**RESPONSE, "output": []}).model_dump_json().encode())
    sdk.openai.responses.create(model="gpt-4.1", input="and now?", previous_response_id="resp_0")
    conversation = read(sdk.exchanges[0])
    assert conversation.notes == (
        "continues response resp_0: the turns before it are held by OpenAI and are not in "
        "this request",
    )


# --- Anthropic Messages -------------------------------------------------------------------

ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather",
        "input_schema": WEATHER["function"]["parameters"],
    },  # type: ignore[index]
    {"name": "get_time", "input_schema": {"type": "object", "properties": {"zone": {}}}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
]


def test_a_streamed_anthropic_tool_use_and_the_tool_result_that_answers_it(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    system = [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Be kind."}]
    with sdk.anthropic.messages.stream(
        model="claude-sonnet-4-20250514",
        max_tokens=100,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "Paris"}],
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_message()
    first = read(sdk.exchanges[0])
    assert first.system == "You are terse.\nBe kind."
    assert [(t.name, t.kind) for t in first.tools] == [
        ("get_weather", "function"),
        ("get_time", "function"),
        ("web_search", "web_search_20250305"),
    ]
    got = first.answer
    assert got is not None and got.streamed and got.complete
    uses = [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert [(c.id, c.name, c.value) for c in got.tool_calls] == uses
    assert [c.value for c in got.tool_calls] == [{"city": "Paris"}, {"zone": "Paris"}]
    assert got.finish_reason == "tool_use"

    results = [
        {
            "type": "tool_result",
            "tool_use_id": c.id,
            "content": [{"type": "text", "text": "sunny"}],
            "is_error": n == 1,
        }
        for n, c in enumerate(got.tool_calls)
    ]
    sdk.anthropic.messages.create(
        model="claude-sonnet-4-20250514",
        max_tokens=100,
        messages=[
            {"role": "user", "content": "Paris"},
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},  # type: ignore[misc]
            {"role": "user", "content": results},  # type: ignore[typeddict-item]
        ],
    )
    second = read(sdk.exchanges[1])
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert [c.id for c in second.messages[1].tool_calls] == [c.id for c in got.tool_calls]
    assert [(r.call_id, r.text, r.is_error) for r in second.tool_results()] == [
        (got.tool_calls[0].id, "sunny", False),
        (got.tool_calls[1].id, "sunny", True),
    ]
    assert second.answer is not None and second.answer.text.startswith("answer 2 to:")


def test_an_anthropic_stream_that_dies_with_an_error_event_says_so(upstream: Upstream) -> None:
    sdk = RecordingSdk(upstream)
    sdk.send(
        "POST",
        "/v1/messages?overload_after=2",
        json={
            "model": "claude-test",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hello there you"}],
        },
    )
    got = read(sdk.exchanges[0]).answer
    assert got is not None and got.streamed
    assert got.error == "overloaded_error: Overloaded"
    assert not got.complete
    assert got.text == "answer 1 "  # two text deltas came before the error


# --- answers that did not end properly, encodings, bodies that cannot be read -------------


def truncated(exchange: Exchange, keep: int) -> Exchange:
    assert exchange.recorded.response is not None
    response = dataclasses.replace(
        exchange.recorded.response, body=exchange.recorded.response.body[:keep]
    )
    return changed(exchange, response=response, outcome=Outcome.TRUNCATED, error="connection reset")


def test_a_stream_cut_off_in_the_middle_of_a_tool_calls_arguments(upstream: Upstream) -> None:
    sdk = RecordingSdk(upstream)
    sdk.openai.chat.completions.create(model="gpt-4o", messages=CHAT, tools=[WEATHER], stream=True)  # type: ignore[arg-type, list-item, call-overload]
    whole = sdk.exchanges[0]
    assert whole.recorded.response is not None
    # The pieces are '{"ci', 'ty":', ' "Pa', 'ris"', '}': cut inside the chunk of the fourth.
    cut = whole.recorded.response.body.index(b'"arguments":"ris') + 5
    conversation = read(truncated(whole, cut))

    got = conversation.answer
    assert got is not None and not got.complete
    assert [(c.id, c.name, c.value) for c in got.tool_calls] == [("call_1_0", "get_weather", None)]
    assert got.tool_calls[0].arguments == '{"city": "Pa'
    assert got.finish_reason is None
    assert conversation.notes == ("the connection ended before the answer did: connection reset",)


def test_a_client_that_stopped_reading_at_the_end_event_got_a_complete_answer(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    sdk.openai.chat.completions.create(model="gpt-4o", messages=CHAT, stream=True)  # type: ignore[arg-type, call-overload]
    left = changed(sdk.exchanges[0], outcome=Outcome.TRUNCATED, error="Client disconnected.")
    conversation = read(left)
    assert conversation.answer is not None and conversation.answer.complete
    assert conversation.notes == ()


def test_a_stream_that_ends_without_its_end_event_is_not_complete() -> None:
    body = anthropic_stream(['{"city":', ' "Paris"}'])
    body = body[: body.index(b"event: message_stop")]
    exchange = stored_exchange(
        seq=0,
        url="https://api.anthropic.com/v1/messages",
        request_body=b'{"model": "claude-3-5-haiku-latest", "stream": true, "messages": []}',
        response_headers=((b"content-type", b"text/event-stream"),),
        response_body=body,
    )
    conversation = read(exchange)
    got = conversation.answer
    assert got is not None and not got.complete
    assert got.tool_calls[0].value == {"city": "Paris"}
    assert got.finish_reason == "tool_use"
    assert conversation.notes == ("the stream ended without message_stop",)


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd", "deflate"])
def test_an_encoded_answer_reads_as_the_same_answer(upstream: Upstream, coding: str) -> None:
    sdk = RecordingSdk(upstream)
    sdk.openai.chat.completions.create(model="gpt-4o", messages=CHAT, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    plain = sdk.exchanges[0]
    assert plain.recorded.response is not None
    response = dataclasses.replace(
        plain.recorded.response,
        body=ENCODERS[coding](plain.recorded.response.body),
        headers=(*plain.recorded.response.headers, (b"content-encoding", coding.encode())),
    )
    assert read(changed(plain, response=response)) == read(plain)


def test_a_gzip_request_body_is_read_too() -> None:
    exchange = stored_exchange(
        seq=0,
        url="https://api.openai.com/v1/chat/completions",
        request_headers=((b"content-type", b"application/json"), (b"content-encoding", b"gzip")),
        request_body=gzip.compress(
            b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
        ),
        response_body=json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}]}
        ).encode(),
    )
    conversation = read(exchange)
    assert [m.text for m in conversation.messages] == ["hi"]
    assert conversation.answer is not None and conversation.answer.text == "hello"


def test_bodies_kept_in_the_store_give_what_the_recorded_metadata_knows() -> None:
    exchange = stored_exchange(
        seq=4,
        url="https://api.openai.com/v1/chat/completions",
        request_body_ref=BlobRef("ab" * 32, 30_000_000),
        facts={
            "model": "gpt-4o",
            "stream": True,
            "answered_model": "gpt-4o-2024-08-06",
            "finish_reason": "stop",
            "usage": {"prompt_tokens": 100_000, "completion_tokens": 28_000},
        },
    )
    assert exchange.recorded.response is not None
    exchange = changed(
        exchange,
        response=dataclasses.replace(
            exchange.recorded.response, body=b"", body_ref=BlobRef("cd" * 32, 20_000_000)
        ),
    )
    conversation = read(exchange)
    assert (conversation.model, conversation.stream, conversation.messages) == ("gpt-4o", True, ())
    answer = conversation.answer
    assert answer is not None and not answer.complete
    assert (answer.model, answer.finish_reason) == ("gpt-4o-2024-08-06", "stop")
    assert conversation.context is not None and conversation.context.share == 1.0
    assert conversation.notes == (
        "the request body (30,000,000 bytes) is kept in the store",
        "the answer body (20,000,000 bytes) is kept in the store",
    )


def test_a_body_that_is_not_json_is_said_not_to_be() -> None:
    exchange = stored_exchange(
        seq=0,
        url="https://api.openai.com/v1/chat/completions",
        request_body=b"model=gpt-4o",
        status=502,
        response_headers=((b"content-type", b"text/html"),),
        response_body=b"<html>Bad Gateway</html>",
    )
    conversation = read(exchange)
    answer = conversation.answer
    assert answer is not None and answer.complete
    assert answer.error == "HTTP 502 OK"
    assert conversation.notes == (
        "the request body is not a JSON object",
        "the answer is not a JSON object",
    )


def test_an_error_answer_names_its_error() -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    exchange = stored_exchange(
        seq=0,
        url="https://api.anthropic.com/v1/messages",
        request_body=b'{"model": "claude-3-opus-20240229", "messages": []}',
        status=429,
        response_body=json.dumps(error).encode(),
    )
    answer = read(exchange).answer
    assert answer is not None and answer.error == "rate_limit_error: slow down"


def test_no_answer_at_all() -> None:
    exchange = stored_exchange(
        seq=0,
        url="https://api.openai.com/v1/responses",
        request_body=b'{"model": "o3", "input": "hi"}',
        status=None,
    )
    conversation = read(exchange)
    assert conversation.answer is None and conversation.context is not None
    assert conversation.context.used is None
    assert conversation.notes == ("no answer came (connection refused)",)


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", "https://api.upstream.test/tool/counter?q=1", b""),
        ("POST", "https://api.openai.com/v1/embeddings", b'{"model": "m", "input": "x"}'),
        ("POST", "https://api.anthropic.com/v1/messages/count_tokens", b'{"model": "m"}'),
        ("GET", "https://api.openai.com/v1/responses", b""),
        (
            "POST",
            "https://mcp.test/v1/responses",
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        ),
    ],
)
def test_traffic_that_is_no_model_call_has_no_conversation(
    method: str, url: str, body: bytes
) -> None:
    exchange = stored_exchange(seq=0, method=method, url=url, request_body=body)
    assert conversation_of(exchange) is None


# --- the context window -------------------------------------------------------------------


def test_anthropic_cache_tokens_count_against_the_window_and_the_1m_beta_widens_it() -> None:
    sdk = RecordingSdk()
    usage = {
        "input_tokens": 1_000,
        "cache_creation_input_tokens": 20_000,
        "cache_read_input_tokens": 150_000,
    }
    for beta in ((), ("context-1m-2025-08-07",)):
        body = anthropic_stream(['{"city": "Paris"}']).replace(
            b'"input_tokens":50', json.dumps(usage)[1:-1].replace(" ", "").encode()
        )
        sdk.prepare(body, content_type="text/event-stream")
        with sdk.anthropic.beta.messages.stream(
            model="claude-sonnet-4-20250514",
            max_tokens=100,
            messages=[{"role": "user", "content": "Paris"}],
            betas=list(beta),  # type: ignore[arg-type]
        ) as stream:
            stream.get_final_message()
    plain, wide = (read(exchange).context for exchange in sdk.exchanges)
    assert plain is not None and wide is not None
    assert (plain.window, plain.family, plain.input_tokens, plain.output_tokens) == (
        200_000,
        "claude-sonnet-4",
        171_000,
        9,  # message_delta's count, cumulative, replaces message_start's
    )
    assert (plain.used, plain.share) == (171_009, 171_009 / 200_000)
    assert (wide.window, wide.family) == (1_000_000, "claude-sonnet-4 with the 1M-token beta")


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("openai/gpt-4.1-nano", 1_047_576),
        ("gpt-3.5-turbo-instruct", 4_096),
        ("o1-preview-2024-09-12", 128_000),
        ("gpt-4.5-preview", None),
        ("llama-3.1-70b", None),
    ],
)
def test_the_window_comes_from_the_longest_family_the_model_name_starts_with(
    model: str, window: int | None
) -> None:
    exchange = stored_exchange(
        seq=0,
        url="https://api.openai.com/v1/chat/completions",
        request_body=json.dumps({"model": model, "messages": []}).encode(),
        response_body=b'{"usage": {"prompt_tokens": 10, "completion_tokens": 2}}',
    )
    context = read(exchange).context
    assert (None if context is None else context.window) == window


# --- Cohere Chat v2 ---------------------------------------------------------------------------

COHERE = "https://api.cohere.com/v2/chat"
COHERE_CALL = {  # cohere/v2/types/tool_call_v2.py
    "id": "get_weather_ppxtz6cbyp5w",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
COHERE_USAGE = {
    "billed_units": {"input_tokens": 24, "output_tokens": 12},
    "tokens": {"input_tokens": 1002, "output_tokens": 47},
}


def cohere_call(
    seq: int, messages: list[dict[str, object]], body: bytes, **changes: object
) -> Exchange:
    request = {"model": "command-a-03-2025", "messages": messages, "tools": [WEATHER]}
    return stored_exchange(
        seq=seq,
        url=COHERE,
        request_body=json.dumps(request | changes).encode(),
        response_body=body,
        **(
            {"response_headers": ((b"content-type", b"text/event-stream"),)}
            if changes.get("stream")
            else {}
        ),
    )


def test_a_cohere_chat_v2_call_its_tool_plan_tool_call_usage_and_finish_reason() -> None:
    """Cohere's /v2/chat was a generic JSON exchange: no model call, no conversation, no
    steps (issue 32)."""
    answer = {  # cohere/v2/types/v2chat_response.py
        "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
        "finish_reason": "TOOL_CALL",
        "message": {
            "role": "assistant",
            "tool_plan": "I will look up the weather in Paris.",
            "tool_calls": [COHERE_CALL],
        },
        "usage": COHERE_USAGE,
    }
    ask = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Paris?"}]
    conversation = read(cohere_call(0, ask, json.dumps(answer).encode()))
    assert (conversation.api, conversation.provider, conversation.model) == (
        "cohere.chat",
        "cohere",
        "command-a-03-2025",
    )
    assert [m.role for m in conversation.messages] == ["system", "user"]
    assert conversation.system == "Be brief." and conversation.tools[0].name == "get_weather"
    said = conversation.answer
    assert said is not None
    assert said.tool_calls == (
        ToolCall("get_weather_ppxtz6cbyp5w", "get_weather", '{"city":"Paris"}', {"city": "Paris"}),
    )
    assert said.parts == (Part("thinking", "I will look up the weather in Paris."),)
    assert said.finish_reason == "TOOL_CALL"
    assert dict(said.usage) == {
        "input_tokens": 1002,
        "output_tokens": 47,
        "billed_units.input_tokens": 24,
        "billed_units.output_tokens": 12,
    }


def test_a_streamed_cohere_chat_v2_call_is_put_back_together_and_its_result_linked() -> None:
    events = [  # cohere/v2/types/streamed_chat_response_v2.py
        {"type": "message-start", "id": "c14c", "delta": {"message": {"role": "assistant"}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will "}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "look it up."}}},
        {
            "type": "tool-call-start",
            "index": 0,
            "delta": {
                "message": {
                    "tool_calls": {
                        **COHERE_CALL,
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                }
            },
        },  # fmt: skip
        {
            "type": "tool-call-delta",
            "index": 0,
            "delta": {"message": {"tool_calls": {"function": {"arguments": '{"city":'}}}},
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "delta": {"message": {"tool_calls": {"function": {"arguments": '"Paris"}'}}}},
        },
        {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL", "usage": COHERE_USAGE}},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    ask = [{"role": "user", "content": "Paris?"}]
    first = cohere_call(0, ask, stream, stream=True)
    said = read(first).answer
    assert said is not None and said.complete and said.streamed
    assert said.tool_calls[0].value == {"city": "Paris"} and said.finish_reason == "TOOL_CALL"
    assert said.text == "" and said.parts == (Part("thinking", "I will look it up."),)

    final = {"id": "d2", "finish_reason": "COMPLETE", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Sunny."}]}, "usage": COHERE_USAGE}  # fmt: skip
    result = {"role": "tool", "tool_call_id": COHERE_CALL["id"], "content": [
        {"type": "document", "document": {"data": '{"sky": "clear"}'}}]}  # fmt: skip
    turn = [*ask, {"role": "assistant", "tool_calls": [COHERE_CALL]}, result]
    second = cohere_call(1, turn, json.dumps(final).encode())
    asked, answered = agent_steps([first, second]).steps
    assert asked.title == "command-a-03-2025 asks for get_weather"
    assert asked.calls[0].result_in == Link(1, Match.EXACT, "tool_call_id get_weather_ppxtz6cbyp5w")
    assert read(second).answer.text == "Sunny."  # type: ignore[union-attr]
