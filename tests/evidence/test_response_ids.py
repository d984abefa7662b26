"""The Responses API's minted ids: read from answers, paired, and keyed as the recording's."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from support.streams import sse

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize
from freezeframe.evidence.response_ids import IdMap, answer_ids, is_responses_path, pair_ids

RECORDED = {
    "id": "resp_68af0a1b2c3d",
    "object": "response",
    "output": [
        {"type": "reasoning", "id": "rs_68af0a1b2c3e", "summary": []},
        {"type": "function_call", "id": "fc_68af0a1b2c3f", "call_id": "call_Q1w2E3r4", "name": "f"},
    ],
}
LIVE = {
    "id": "resp_99bb77cc55dd",
    "object": "response",
    "output": [
        {"type": "reasoning", "id": "rs_99bb77cc55de", "summary": []},
        {"type": "function_call", "id": "fc_99bb77cc55df", "call_id": "call_Z9x8C7v6", "name": "f"},
    ],
}


def test_ids_are_read_from_a_whole_answer_and_from_its_stream() -> None:
    whole = answer_ids(json.dumps(RECORDED).encode(), "application/json")
    assert whole == (
        ("response id", "resp_68af0a1b2c3d"),
        ("output[0] id", "rs_68af0a1b2c3e"),
        ("output[1] id", "fc_68af0a1b2c3f"),
        ("output[1] call_id", "call_Q1w2E3r4"),
    )
    created = {"type": "response.created", "response": {**RECORDED, "output": []}}
    added = [
        {"type": "response.output_item.added", "output_index": n, "item": item}
        for n, item in enumerate(RECORDED["output"])  # type: ignore[arg-type]
    ]
    assert answer_ids(sse(created, *added), "text/event-stream") == whole, "cut before the end"
    done = {"type": "response.completed", "response": RECORDED}
    assert answer_ids(sse(created, *added, done), "text/event-stream") == whole
    assert answer_ids(b'{"id": "chatcmpl-1"}', "application/json") == ()
    assert answer_ids(b"not json", "text/plain") == ()


def test_ids_pair_by_place_and_kind() -> None:
    pairs = pair_ids(
        answer_ids(json.dumps(RECORDED).encode(), "application/json"),
        answer_ids(json.dumps(LIVE).encode(), "application/json"),
    )
    assert pairs == (
        ("resp_68af0a1b2c3d", "resp_99bb77cc55dd"),
        ("rs_68af0a1b2c3e", "rs_99bb77cc55de"),
        ("fc_68af0a1b2c3f", "fc_99bb77cc55df"),
        ("call_Q1w2E3r4", "call_Z9x8C7v6"),
    )
    shorter = {**LIVE, "output": [{"type": "message", "id": "msg_99bb77cc55e0"}]}
    assert pair_ids(
        answer_ids(json.dumps(RECORDED).encode(), "application/json"),
        answer_ids(json.dumps(shorter).encode(), "application/json"),
    ) == (("resp_68af0a1b2c3d", "resp_99bb77cc55dd"),), "an item of another kind is not paired"


def _next_turn(previous: str, call_id: str, item_id: str, text: str = "ok") -> RequestView:
    body = {
        "model": "gpt-4.1",
        "previous_response_id": previous,
        "input": [
            {"type": "item_reference", "id": item_id},
            {"type": "function_call_output", "call_id": call_id, "output": text},
        ],
    }
    return RequestView.of(
        "POST",
        "https",
        "api.openai.com",
        443,
        "/v1/responses",
        (("content-type", "application/json"),),
        json.dumps(body).encode(),
    )


def test_a_request_naming_live_ids_keys_as_the_recorded_one_and_a_changed_one_does_not() -> None:
    config = KeyConfig()
    recorded = canonicalize(
        _next_turn("resp_68af0a1b2c3d", "call_Q1w2E3r4", "fc_68af0a1b2c3f"), config
    )
    live = _next_turn("resp_99bb77cc55dd", "call_Z9x8C7v6", "fc_99bb77cc55df")
    assert canonicalize(live, config).key != recorded.key

    ids = IdMap()
    assert ids.recorded_view(live) is None, "nothing learned, nothing mapped"
    learned = ids.learn(
        pair_ids(
            answer_ids(json.dumps(RECORDED).encode(), "application/json"),
            answer_ids(json.dumps(LIVE).encode(), "application/json"),
        )
    )
    assert len(learned) == 4 and ids.learn([("resp_68af0a1b2c3d", "resp_99bb77cc55dd")]) == ()
    mapped = ids.recorded_view(live)
    assert mapped is not None and canonicalize(mapped, config).key == recorded.key

    changed = ids.recorded_view(
        _next_turn("resp_99bb77cc55dd", "call_Z9x8C7v6", "fc_99bb77cc55df", "no orders")
    )
    assert changed is not None and canonicalize(changed, config).key != recorded.key
    prefixed = ids.to_recorded("resp_99bb77cc55ddX resp_99bb77cc55dd")
    assert prefixed == "resp_99bb77cc55ddX resp_68af0a1b2c3d", "whole ids only"


def test_responses_paths() -> None:
    assert is_responses_path("/v1/responses")
    assert is_responses_path("/openai/v1/responses/resp_1/cancel?x=1")
    assert not is_responses_path("/v1/responses_archive")
    assert not is_responses_path("/v1/chat/completions")


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=12) | st.sampled_from(["resp_68af0a1b2c3d"]),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["id", "output", "call_id", "type", "response"]), inner
            )
        ),
        max_leaves=12,
    ),
    st.sampled_from(["application/json", "text/event-stream"]),
)
def test_any_answer_reads_without_raising(value: object, media: str) -> None:
    body = json.dumps(value).encode()
    if media == "text/event-stream":
        body = b"data: " + body + b"\n\n"
    found = answer_ids(body, media)
    assert all(isinstance(where, str) and isinstance(minted, str) for where, minted in found)
    pair_ids(found, found)
