"""Keys of Realtime sessions: the client's events, without the ids each run mints."""

from __future__ import annotations

import json
from typing import Any

from freezeframe.canonicalize.realtime import client_event_form, session_key


def run(
    minted: str, *, prompt: str = "Where is my order?", audio: bytes = b"\x00\x01"
) -> list[tuple[bool, bytes]]:
    """A client's side of a session, its ids made from ``minted`` (as a new run mints)."""
    events: list[dict[str, Any]] = [
        {"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}},
        {
            "type": "conversation.item.create",
            "previous_item_id": f"item_{minted}_0",
            "item": {
                "id": f"item_client_{minted}",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        },
        {"type": "response.create", "response": {"output_modalities": ["text"]}},
        {"type": "conversation.item.truncate", "item_id": f"item_{minted}_2", "audio_end_ms": 900},
        {"type": "response.cancel", "response_id": f"resp_{minted}"},
    ]
    messages = [
        (True, json.dumps({"event_id": f"event_{minted}_{n}", **event}).encode())
        for n, event in enumerate(events)
    ]
    return [*messages, (False, audio)]


def test_the_same_session_with_new_ids_has_one_key() -> None:
    assert session_key(run("a81b")) == session_key(run("ffe0"))


def test_a_changed_prompt_or_other_audio_has_another() -> None:
    first = session_key(run("a81b"))
    assert session_key(run("a81b", prompt="Cancel my order.")) != first
    assert session_key(run("a81b", audio=b"\x00\x02")) != first
    assert session_key(run("a81b")[:-2]) != first, "a shorter session"


def test_member_order_and_whitespace_do_not_matter_and_text_that_is_not_json_does() -> None:
    assert client_event_form(b'{"type": "x", "a": 1}') == client_event_form(b'{"a":1,"type":"x"}')
    assert client_event_form(b"hello") is None
    assert session_key([(True, b"hello")]) != session_key([(False, b"hello")])
