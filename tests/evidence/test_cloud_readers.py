"""Bedrock and Gemini answers read back, and edited streams written back in their framing:
tool uses streamed piece by piece, reasoning, a Nova or Llama InvokeModel stream, an
exception mid-stream; every re-framed event stream read by botocore, which checks its CRCs."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer
from support.exchanges import stored_exchange

from freezeframe.canonicalize import eventstream
from freezeframe.evidence.conversation import conversation_of
from freezeframe.evidence.steps import Match, agent_steps
from freezeframe.whatif.reframe import reframe
from freezeframe.whatif.restream import NotRestreamable

CONVERSE = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream"
INVOKE = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke-with-response-stream"
GEMINI = (
    "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent"
)
STREAM = ((b"content-type", eventstream.MEDIA_TYPE.encode()),)


def converse_stream(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(
        eventstream.event(kind, json.dumps({**payload, "p": "padding"}).encode())
        for kind, payload in events
    )


TOOL_STREAM = converse_stream(
    ("messageStart", {"role": "assistant"}),
    (
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Look "}}},
    ),
    (
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "it up"}}},
    ),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    (
        "contentBlockStart",
        {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}},
    ),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"ci'}}}),
    (
        "contentBlockDelta",
        {"contentBlockIndex": 1, "delta": {"toolUse": {"input": 'ty": "Faro"}'}}},
    ),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    ("messageStop", {"stopReason": "tool_use"}),
    (
        "metadata",
        {
            "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
            "metrics": {"latencyMs": 9},
        },
    ),
)


def converse(body: bytes, url: str = CONVERSE) -> Any:
    request = json.dumps({"messages": [{"role": "user", "content": [{"text": "Faro?"}]}]}).encode()
    exchange = stored_exchange(
        seq=1, url=url, request_body=request, response_headers=STREAM, response_body=body
    )
    return conversation_of(exchange)


def botocore_events(data: bytes) -> list[dict[str, Any]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [{m.headers[":event-type"]: json.loads(m.payload)} for m in buffer]


def test_a_streamed_tool_use_and_its_reasoning_are_put_back_together() -> None:
    found = converse(TOOL_STREAM)
    assert found.provider == "aws.bedrock" and found.api == "bedrock.converse"
    answer = found.answer
    (call,) = answer.tool_calls
    assert (call.id, call.name, call.value) == ("t1", "get_weather", {"city": "Faro"})
    assert [(p.kind, p.text) for p in answer.parts] == [("thinking", "Look it up")]
    assert answer.finish_reason == "tool_use" and answer.usage["totalTokens"] == 7
    assert answer.complete and answer.streamed


def test_an_exception_mid_stream_is_the_answer_s_error_and_refuses_an_edit() -> None:
    body = converse_stream(
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hal"}}),
    ) + eventstream.exception("modelStreamErrorException", b'{"message":"The model failed"}')
    answer = converse(body).answer
    assert answer.text == "Hal" and answer.error == "modelStreamErrorException: The model failed"
    with pytest.raises(NotRestreamable, match="modelStreamErrorException"):
        reframe("bedrock.converse", body)


def test_an_edited_converse_stream_is_framed_as_botocore_reads_it() -> None:
    found = reframe("bedrock.converse", TOOL_STREAM)
    assert found.message["output"]["message"]["content"][1]["toolUse"]["input"] == {"city": "Faro"}
    found.message["output"]["message"]["content"][1]["toolUse"]["input"] = {"city": "Porto"}
    data = b"".join(found.encode(found.message))
    events = botocore_events(data)
    assert events[0] == {"messageStart": {"role": "assistant"}}
    assert {"messageStop": {"stopReason": "tool_use"}} in events
    again = converse(data).answer
    assert again.tool_calls[0].value == {"city": "Porto"}
    assert [(p.kind, p.text) for p in again.parts] == [("thinking", "Look it up")]
    assert b'"p"' not in data


def chunks(*events: dict[str, Any]) -> bytes:
    return b"".join(
        eventstream.event(
            "chunk",
            json.dumps({"bytes": base64.b64encode(json.dumps(e).encode()).decode()}).encode(),
        )
        for e in events
    )


def test_invoke_streams_of_nova_and_llama_are_read_by_their_own_shapes() -> None:
    request = json.dumps({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}).encode()
    nova = chunks(
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": "Ol"}, "contentBlockIndex": 0}},
        {"contentBlockDelta": {"delta": {"text": "á"}, "contentBlockIndex": 0}},
        {
            "messageStop": {"stopReason": "end_turn"},
            "amazon-bedrock-invocationMetrics": {"inputTokenCount": 1},
        },
    )
    exchange = stored_exchange(
        seq=1, url=INVOKE, request_body=request, response_headers=STREAM, response_body=nova
    )
    answer = conversation_of(exchange).answer
    assert (answer.text, answer.complete) == ("Olá", True)
    llama = chunks(
        {"generation": "Hel", "stop_reason": None},
        {
            "generation": "lo",
            "stop_reason": "stop",
            "amazon-bedrock-invocationMetrics": {"inputTokenCount": 1},
        },
    )
    prompt = json.dumps({"prompt": "Say hello", "max_gen_len": 20}).encode()
    exchange = stored_exchange(
        seq=1, url=INVOKE, request_body=prompt, response_headers=STREAM, response_body=llama
    )
    read = conversation_of(exchange)
    assert (
        read.messages[0].text == "Say hello"
        and read.answer.text == "Hello"
        and read.answer.complete
    )
    mistral = chunks({"outputs": [{"text": "Hi", "stop_reason": "stop"}]})
    with pytest.raises(NotRestreamable, match="Anthropic, Amazon Nova and Meta Llama models"):
        reframe("bedrock.invoke", mistral)


def decoded_chunks(data: bytes) -> list[dict[str, Any]]:
    """The model's own chunks of an InvokeModel stream, as botocore hands them to boto3."""
    return [json.loads(base64.b64decode(e["chunk"]["bytes"])) for e in botocore_events(data)]


def test_an_edited_nova_invoke_stream_is_written_back_as_nova_chunks() -> None:
    metrics = {"inputTokenCount": 3, "outputTokenCount": 2}
    nova = chunks(
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": "Ol"}, "contentBlockIndex": 0}},
        {"contentBlockDelta": {"delta": {"text": "á"}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {
            "metadata": {"usage": {"inputTokens": 3, "outputTokens": 2}, "trace": {}},
            "amazon-bedrock-invocationMetrics": metrics,
        },
    )
    found = reframe("bedrock.invoke", nova)
    assert found.message["output"]["message"]["content"] == [{"text": "Olá"}]
    found.message["output"]["message"]["content"][0]["text"] = "Adeus"
    written = decoded_chunks(b"".join(found.encode(found.message)))
    assert written == [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Adeus"}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {
            "metadata": {"trace": {}, "usage": {"inputTokens": 3, "outputTokens": 2}},
            "amazon-bedrock-invocationMetrics": metrics,
        },
    ]


def test_an_edited_llama_invoke_stream_is_its_text_then_its_counts_and_stop_reason() -> None:
    metrics = {"inputTokenCount": 4, "outputTokenCount": 2}
    llama = chunks(
        {
            "generation": "Hel",
            "prompt_token_count": 4,
            "generation_token_count": 1,
            "stop_reason": None,
        },
        {
            "generation": "lo",
            "prompt_token_count": None,
            "generation_token_count": 2,
            "stop_reason": None,
        },
        {
            "generation": "",
            "prompt_token_count": None,
            "generation_token_count": 2,
            "stop_reason": "stop",
            "amazon-bedrock-invocationMetrics": metrics,
        },
    )
    found = reframe("bedrock.invoke", llama)
    assert found.message == {
        "generation": "Hello",
        "prompt_token_count": 4,
        "generation_token_count": 2,
        "stop_reason": "stop",
    }
    written = decoded_chunks(b"".join(found.encode({**found.message, "generation": "Olá"})))
    assert written == [
        {
            "generation": "Olá",
            "prompt_token_count": 4,
            "generation_token_count": 1,
            "stop_reason": None,
        },
        {
            "generation": "",
            "prompt_token_count": None,
            "generation_token_count": 2,
            "stop_reason": "stop",
            "amazon-bedrock-invocationMetrics": metrics,
        },
    ]
    with pytest.raises(NotRestreamable, match="without a stop_reason"):
        reframe("bedrock.invoke", chunks({"generation": "Hel", "stop_reason": None}))


def gemini_answer(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-pro-001", "responseId": "r1"}


GEMINI_PARTS = [
    gemini_answer([{"text": "Thinking", "thought": True}]),
    gemini_answer([{"text": "It is "}]),
    gemini_answer([{"text": "sunny"}]),
    gemini_answer([{"functionCall": {"id": "f1", "name": "book", "args": {"day": "Mon"}}}], "STOP"),
]


@pytest.mark.parametrize("framing", ["sse", "array"])
def test_a_gemini_stream_is_read_and_re_framed_as_it_was_recorded(framing: str) -> None:
    if framing == "sse":
        body = b"".join(b"data: " + json.dumps(a).encode() + b"\r\n\r\n" for a in GEMINI_PARTS)
        headers = ((b"content-type", b"text/event-stream"),)
    else:
        body = json.dumps(GEMINI_PARTS).encode()
        headers = ((b"content-type", b"application/json; charset=UTF-8"),)
    request = json.dumps(
        {
            "contents": [{"role": "user", "parts": [{"text": "Weather?"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [
                {"functionDeclarations": [{"name": "book", "parameters": {"type": "object"}}]}
            ],
        }
    ).encode()
    exchange = stored_exchange(
        seq=1, url=GEMINI, request_body=request, response_headers=headers, response_body=body
    )
    read = conversation_of(exchange)
    assert (read.provider, read.model, read.system) == ("gcp.gemini", "gemini-2.5-pro", "Be brief.")
    assert read.tools[0].name == "book"
    answer = read.answer
    assert answer.text == "It is sunny" and [p.kind for p in answer.parts] == ["thinking", "text"]
    assert (answer.tool_calls[0].id, answer.tool_calls[0].value) == ("f1", {"day": "Mon"})
    assert answer.finish_reason == "STOP" and answer.model == "gemini-2.5-pro-001"
    found = reframe("gemini.generate-content", body)
    assert found.message["candidates"][0]["content"]["parts"][1] == {"text": "It is sunny"}
    found.message["candidates"][0]["content"]["parts"][1]["text"] = "Rain"
    written = b"".join(found.encode(found.message))
    again = conversation_of(
        stored_exchange(
            seq=1, url=GEMINI, request_body=request, response_headers=headers, response_body=written
        )
    ).answer
    assert again.text == "Rain" and again.tool_calls == answer.tool_calls
    assert again.finish_reason == "STOP"
    if framing == "array":
        assert [len(item["candidates"]) for item in json.loads(written)] == [1, 1, 1]


@pytest.mark.parametrize(
    "spelling", ["parametersJsonSchema", "parameters_json_schema", "parameters"]
)
def test_a_gemini_tool_s_schema_is_read_however_it_is_spelled(spelling: str) -> None:
    """google-genai sends ``parameters_json_schema``, the field's proto name, which the API
    takes as it takes ``parametersJsonSchema``."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    declared = {"functionDeclarations": [{"name": "get_weather", spelling: schema}]}
    request = {"contents": [{"role": "user", "parts": [{"text": "Aveiro"}]}], "tools": [declared]}
    exchange = stored_exchange(
        seq=1,
        url=GEMINI,
        request_body=json.dumps(request).encode(),
        response_body=json.dumps(GEMINI_PARTS[-1]).encode(),
    )
    assert conversation_of(exchange).tools[0].parameters == schema


def test_a_bedrock_model_id_and_a_gemini_model_have_known_context_windows() -> None:
    url = CONVERSE.replace("/model/m/", "/model/us.anthropic.claude-3-5-sonnet-20240620-v1%3A0/")
    context = converse(TOOL_STREAM, url).context
    assert (context.family, context.window, context.used) == ("claude-3", 200_000, 7)
    gemini = stored_exchange(
        seq=1,
        url=GEMINI,
        request_body=b'{"contents": []}',
        response_body=json.dumps(
            {
                **GEMINI_PARTS[-1],
                "usageMetadata": {"promptTokenCount": 90, "candidatesTokenCount": 10},
            }
        ).encode(),
    )
    found = conversation_of(gemini).context
    assert (found.family, found.used) == ("gemini-2.5-pro", 100)


def test_gemini_function_calls_link_to_the_tool_and_the_response_by_id() -> None:
    ask = {"contents": [{"role": "user", "parts": [{"text": "Book Monday"}]}]}
    call = gemini_answer(
        [{"functionCall": {"id": "f1", "name": "book", "args": {"day": "Mon"}}}], "STOP"
    )
    back = {
        "contents": [
            *ask["contents"],
            call["candidates"][0]["content"],
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "f1", "name": "book", "response": {"ok": True}}}
                ],
            },
        ]
    }
    json_headers = ((b"content-type", b"application/json"),)
    plain = GEMINI.replace("streamGenerateContent", "generateContent")
    run = [
        stored_exchange(
            seq=0,
            url=plain,
            request_body=json.dumps(ask).encode(),
            response_headers=json_headers,
            response_body=json.dumps(call).encode(),
        ),
        stored_exchange(
            seq=1,
            method="GET",
            url="https://tools.example/book?day=Mon",
            response_body=b'{"ok": true}',
        ),
        stored_exchange(
            seq=2,
            url=plain,
            request_body=json.dumps(back).encode(),
            response_headers=json_headers,
            response_body=json.dumps(gemini_answer([{"text": "Booked"}], "STOP")).encode(),
        ),
    ]
    steps = agent_steps(run)
    (linked,) = [c for s in steps.steps for c in s.calls]
    assert linked.executed_by is not None and linked.executed_by.seq == 1
    assert linked.result_in is not None and linked.result_in.seq == 2
    assert (linked.result_in.match, linked.result_in.why) == (Match.EXACT, "functionResponse id f1")
