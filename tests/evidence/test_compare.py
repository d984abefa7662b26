"""Two runs compared step by step: aligned, each difference placed, the divergence named."""

from __future__ import annotations

import json

from support.exchanges import stored_exchange

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize
from freezeframe.evidence.compare import compare_runs, diff_document

CHAT = "https://api.openai.com/v1/chat/completions"


def model_call(seq: int, content: str, answer: str, fingerprint: str = "fp_1") -> object:
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
    reply = {
        "id": f"chatcmpl-{seq}",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": fingerprint,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    body = json.dumps(request).encode()
    view = RequestView.of("POST", "https", "api.openai.com", 443, "/v1/chat/completions",
                          [("content-type", "application/json")], body)  # fmt: skip
    canonical = canonicalize(view, KeyConfig()).form
    return stored_exchange(
        seq=seq,
        url=CHAT,
        request_body=body,
        response_body=json.dumps(reply).encode(),
        canonical=canonical,
    )


def tool_call(seq: int, body: dict[str, object], path: str = "/orders?user=u-1") -> object:
    return stored_exchange(
        seq=seq,
        method="GET",
        url=f"https://orders.internal{path}",
        response_body=json.dumps(body).encode(),
    )


def test_identical_runs_are_equivalent_and_metadata_alone_never_makes_them_differ() -> None:
    a = [model_call(0, "hi", "hello"), tool_call(1, {"orders": [1]})]
    b = [model_call(0, "hi", "hello", fingerprint="fp_2"), tool_call(1, {"orders": [1]})]
    compared = compare_runs("a", a, "b", b)  # type: ignore[arg-type]
    assert compared.equivalent and compared.first_divergence is None
    assert [c.what for c in compared.steps[0].metadata] == ["system_fingerprint"]
    assert diff_document(compared)["equivalent"] is True


def test_a_changed_prompt_an_edited_tool_answer_and_a_new_step_are_each_placed() -> None:
    a = [model_call(0, "hi", "hello"), tool_call(1, {"orders": [1, 2, 3]}), model_call(2, "x", "A")]
    b = [
        model_call(0, "hi there", "hello"),
        tool_call(1, {"orders": [2]}),
        tool_call(2, {"ok": True}, path="/audit"),
        model_call(3, "x", "B"),
    ]
    compared = compare_runs("a", a, "b", b)  # type: ignore[arg-type]
    first, tool, audit, last = compared.steps
    assert compared.first_divergence == 0
    assert [c.what for c in first.request] == ["$.messages[0].content"]
    assert first.answer == ()
    assert (tool.a, tool.b) == (1, 1) and {c.what for c in tool.answer} == {
        "$.orders[0]",
        "$.orders[1]",
        "$.orders[2]",
    }
    assert (audit.a, audit.b, audit.diverges) == (None, 2, True)
    assert (last.a, last.b) == (2, 3)
    assert [(c.what, c.a, c.b) for c in last.answer] == [("text", "A", "B")]
