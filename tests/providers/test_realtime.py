"""A Realtime session read as a conversation, and its last response edited, from events."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.exchanges import stored_exchange

from freezeframe.evidence.conversation import conversation_of
from freezeframe.evidence.steps import Link, Match, agent_steps
from freezeframe.providers.realtime import read_session
from freezeframe.storage import Exchange, Message
from freezeframe.whatif.realtime_edit import NotEditable, edit_last_response

URL = "https://api.openai.com/v1/realtime?model=gpt-realtime-2026"


def recorded(*events: tuple[str, dict[str, Any]]) -> Exchange:
    messages = tuple(
        Message(from_client=side == "client", text=True, at=n / 10, data=json.dumps(e).encode())
        for n, (side, e) in enumerate(events)
    )
    return stored_exchange(
        seq=0, method="GET", url=URL, status=101, response_headers=(), messages=messages
    )


USER_AUDIO = {"id": "item_1", "type": "message", "role": "user", "content": []}
CALL = {"type": "function_call", "name": "lookup_orders", "call_id": "call_9", "arguments": "{}"}
VOICE = recorded(
    ("client", {"type": "session.update", "session": {"instructions": "Be brief."}}),
    ("server", {"type": "conversation.item.added", "item": USER_AUDIO}),
    ("server", {"type": "conversation.item.done", "item": USER_AUDIO}),
    (
        "server",
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "item_id": "item_1",
            "transcript": "where is my order",
        },
    ),
    ("server", {"type": "response.created", "response": {"id": "resp_1"}}),
    ("server", {"type": "response.done", "response": {"id": "resp_1", "output": [CALL]}}),
    (
        "client",
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "call_9", "output": "shipped"},
        },
    ),
    (
        "server",
        {
            "type": "conversation.item.added",
            "item": {
                "id": "item_3",
                "type": "function_call_output",
                "call_id": "call_9",
                "output": "shipped",
            },
        },
    ),
    ("client", {"type": "response.create"}),
    ("server", {"type": "response.created", "response": {"id": "resp_2"}}),
    (
        "server",
        {"type": "response.output_audio_transcript.delta", "response_id": "resp_2", "delta": "It "},
    ),
    (
        "server",
        {
            "type": "response.output_audio_transcript.delta",
            "response_id": "resp_2",
            "delta": "ships.",
        },
    ),
    ("server", {"type": "response.output_audio.delta", "response_id": "resp_2", "delta": "AAAA"}),
    (
        "server",
        {
            "type": "response.done",
            "response": {"id": "resp_2", "status": "completed", "usage": {"total_tokens": 9}},
        },
    ),
)


def test_a_voice_session_reads_as_turns_the_last_response_the_answer() -> None:
    session = read_session(VOICE)
    assert session.model == "gpt-realtime-2026" and session.system == "Be brief."
    turns = [(m.role, m.text, [c.name for c in m.tool_calls]) for m in session.messages]
    assert turns == [
        ("user", "", []),  # spoken: its part is audio, with the transcript
        ("assistant", "", ["lookup_orders"]),
        ("tool", "", []),
    ]
    assert session.messages[0].parts[0].text == "(spoken) where is my order"
    assert session.messages[2].tool_results[0].text == "shipped"
    answer = session.answer
    assert answer is not None and answer.complete
    assert (answer.text, answer.finish_reason, answer.response_id) == (
        "It ships.",
        "completed",
        "resp_2",
    )
    assert answer.usage == {"total_tokens": 9}

    conversation = conversation_of(VOICE)
    assert conversation is not None
    assert (conversation.provider, conversation.api) == ("openai", "openai.realtime")


def test_the_last_response_is_edited_and_its_audio_kept() -> None:
    messages, audio = edit_last_response(
        VOICE.recorded.messages or (),
        lambda found: (
            found | {"output": [{"type": "message", "content": [{"transcript": "Delivered."}]}]}
        ),
    )
    assert audio
    edited = read_session(
        stored_exchange(seq=0, method="GET", url=URL, status=101, messages=messages)
    )
    assert edited.answer is not None and edited.answer.text == "Delivered."
    sent = [json.loads(m.data) for m in messages if not m.from_client]
    deltas = [e["delta"] for e in sent if e["type"] == "response.output_audio_transcript.delta"]
    assert deltas == ["Delivered."]
    assert len(messages) == len(VOICE.recorded.messages or ()) - 1, "one delta said it all"


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.one_of(
                st.binary(max_size=40),
                st.dictionaries(
                    st.sampled_from(
                        [
                            "type",
                            "item",
                            "response",
                            "delta",
                            "item_id",
                            "session",
                            "response_id",
                            "output_index",
                            "content_index",
                        ]
                    ),
                    st.one_of(
                        st.none(),
                        st.integers(),
                        st.text(max_size=8),
                        st.sampled_from(
                            [
                                "response.done",
                                "response.created",
                                "response.output_text.delta",
                                "response.function_call_arguments.done",
                                "conversation.item.added",
                                "error",
                                "r1",
                            ]
                        ),
                        st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
                    ),
                    max_size=4,
                ).map(lambda d: json.dumps(d).encode()),
            ),
        ),
        max_size=12,
    )
)
def test_any_messages_read_without_raising(events: list[tuple[bool, bytes]]) -> None:
    messages = tuple(
        Message(from_client=client, text=True, at=n, data=data)
        for n, (client, data) in enumerate(events)
    )
    exchange = stored_exchange(seq=0, method="GET", url=URL, status=101, messages=messages)
    read_session(exchange)
    try:
        edit_last_response(messages, lambda found: found | {"output": []})
    except NotEditable:
        pass


def test_a_session_s_step_holds_the_calls_it_made_and_the_results_it_sent_back() -> None:
    """The call came in an earlier response, not the answer; its result went back over the
    same WebSocket, so the session's own step carries it."""
    (step,) = agent_steps([VOICE]).steps
    (requested,) = step.calls
    assert (requested.call.name, requested.call.id) == ("lookup_orders", "call_9")
    assert requested.result_in == Link(0, Match.EXACT, "call_id call_9")
