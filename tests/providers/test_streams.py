"""Streamed tool-call arguments put back together, wherever the stream split them or was cut;
and no JSON at all, whatever its shape, makes a reader raise."""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from support.exchanges import changed, stored_exchange
from support.streams import anthropic_stream, chat_stream, responses_stream

from freezeframe.evidence.conversation import conversation_document, conversation_of
from freezeframe.evidence.steps import agent_steps, steps_document
from freezeframe.storage import Exchange, Outcome, Slot

ARGUMENTS = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none()),
    max_size=5,
).map(lambda value: json.dumps(value, ensure_ascii=False))

STREAMS: dict[str, tuple[str, Callable[[list[str]], bytes]]] = {
    "chat": ("https://api.openai.com/v1/chat/completions", chat_stream),
    "responses": (
        "https://api.openai.com/v1/responses",
        lambda pieces: responses_stream(pieces, finished=False),  # deltas alone, no .done
    ),
    "messages": ("https://api.anthropic.com/v1/messages", anthropic_stream),
}


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False)]


def streamed(api: str, body: bytes) -> Exchange:
    return stored_exchange(
        seq=0,
        url=STREAMS[api][0],
        request_body=b'{"model": "m", "stream": true}',
        response_headers=((b"content-type", b"text/event-stream"),),
        response_body=body,
    )


@given(
    api=st.sampled_from(sorted(STREAMS)),
    arguments=ARGUMENTS,
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
@settings(max_examples=150, deadline=None)
def test_arguments_split_anywhere_join_back_to_the_whole(
    api: str, arguments: str, cuts: list[int]
) -> None:
    conversation = conversation_of(streamed(api, STREAMS[api][1](split(arguments, cuts))))
    assert conversation is not None and conversation.answer is not None
    (call,) = conversation.answer.tool_calls
    assert call.arguments == arguments
    assert call.value == json.loads(arguments)


@given(api=st.sampled_from(sorted(STREAMS)), arguments=ARGUMENTS, cut=st.integers(min_value=0))
@settings(max_examples=150, deadline=None)
def test_a_stream_cut_at_any_byte_gives_a_beginning_of_the_arguments_and_says_if_it_ended(
    api: str, arguments: str, cut: int
) -> None:
    body = STREAMS[api][1](split(arguments, list(range(0, len(arguments), 3))))
    cut %= len(body)  # never the whole stream
    exchange = changed(streamed(api, body[:cut]), outcome=Outcome.TRUNCATED)
    conversation = conversation_of(exchange)
    answer = conversation.answer if conversation is not None else None
    assert answer is not None
    calls = answer.tool_calls
    assert len(calls) <= 1
    assert arguments.startswith(calls[0].arguments if calls else "")
    if answer.complete:  # only the end event's last bytes can be missing, if anything
        assert calls[0].arguments == arguments


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
#: Values for the members every reader looks at, so that shapes near the real ones are tried.
MEMBERS = st.dictionaries(
    st.sampled_from(
        [
            "type",
            "role",
            "content",
            "messages",
            "input",
            "output",
            "choices",
            "delta",
            "index",
            "tool_calls",
            "function",
            "arguments",
            "name",
            "id",
            "call_id",
            "item",
            "output_index",
            "content_block",
            "partial_json",
            "text",
            "system",
            "tools",
            "usage",
            "error",
            "model",
            "message",
            "response",
            "source",
            "image_url",
            "instructions",
            "params",
            "result",
        ]
    ),
    JSON,
    max_size=8,
)


@given(
    path=st.sampled_from(sorted(url for url, _ in STREAMS.values()) + ["https://x.test/mcp"]),
    request=MEMBERS,
    events=st.lists(MEMBERS, max_size=6),
    streamed=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_no_shape_of_json_makes_a_reader_raise(
    path: str, request: dict[str, object], events: list[dict[str, object]], streamed: bool
) -> None:
    if streamed:
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        kind = b"text/event-stream"
    else:
        body, kind = json.dumps(events[0] if events else request).encode(), b"application/json"
    exchange = stored_exchange(
        seq=0,
        url=path,
        request_body=json.dumps({"jsonrpc": "2.0", "method": "tools/call", **request}).encode()
        if path.endswith("/mcp")
        else json.dumps(request).encode(),
        response_headers=((b"content-type", kind),),
        response_body=body,
    )
    conversation = conversation_of(exchange)
    if conversation is not None:
        json.dumps(conversation_document(conversation))
    json.dumps(steps_document(agent_steps([exchange, changed(exchange, slot=Slot(1, 0))])))
