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


CALL = "call_1795895031567"


def chat(seq: int, messages: list[dict[str, object]], reply: dict[str, object], status: int = 200):  # type: ignore[no-untyped-def]
    """A chat call of the order agent: its request's canonical form as the proxy keys it."""
    body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    view = RequestView.of("POST", "https", "api.openai.com", 443, "/v1/chat/completions",
                          [("content-type", "application/json")], body)  # fmt: skip
    return stored_exchange(
        seq=seq,
        url=CHAT,
        request_body=body,
        status=status,
        response_body=json.dumps(reply).encode(),
        canonical=canonicalize(view, KeyConfig()).form,
    )


def order_run(  # type: ignore[no-untyped-def]
    echoed: str = CALL,
    *,
    minted_id: str = CALL,
    first_answer: dict[str, object] | None = None,
    status: int = 200,
):
    """The order agent's three steps: the model asks for a tool (minting ``minted_id``), the
    tool answers, the model is asked again with the result under ``echoed``.
    ``first_answer`` replaces the model's first answer, as ``edit --status 429
    --response-body`` does."""
    ask = [{"role": "user", "content": "Where is my latest order?"}]
    function = {"name": "lookup", "arguments": "{}"}
    call = {"id": minted_id, "type": "function", "function": function}
    minted = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    done = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ord_8821 is processing."},
                "finish_reason": "stop",
            }
        ],
    }
    then = [
        *ask,
        {"role": "assistant", "content": None, "tool_calls": [call | {"id": echoed}]},
        {"role": "tool", "tool_call_id": echoed, "content": '{"orders": []}'},
    ]
    return [
        chat(0, ask, first_answer or minted, status=status),
        tool_call(1, {"orders": []}),
        chat(2, then, done),
    ]


def test_a_request_copied_byte_for_byte_into_an_edited_fork_compares_identical() -> None:
    """The fork's first answer, edited to a 429, no longer mints the tool call's id that its
    later request (copied as recorded) still echoes: the same bytes are the same request,
    not ``"⟨call_ 1⟩" -> "call_1795895031567"``."""
    limited = {"error": {"message": "Rate limit reached", "type": "rate_limit"}}
    recorded = order_run()
    fork = order_run(first_answer=limited, status=429)
    assert fork[2].recorded.canonical == recorded[2].recorded.canonical
    compared = compare_runs("first-run", recorded, "first-run-429", fork)  # type: ignore[arg-type]
    assert [pair.request for pair in compared.steps] == [(), (), ()]
    assert compared.first_divergence == 0, "the edited answer is where they part"


def test_a_changed_tool_call_id_reads_as_two_ids_each_with_its_role() -> None:
    """A request echoing an id its run never minted differs, both ids shown as sent, the
    recorded one with its role; a re-run whose ids map one to one is equivalent."""
    recorded = order_run()
    other = compare_runs("a", recorded, "b", order_run("call_other"))  # type: ignore[arg-type]
    changes = {(c.what, c.a, c.b) for c in other.steps[2].request}
    assert ("$.messages[2].tool_call_id", f'"{CALL}" ⟨call_ 1⟩', '"call_other"') in changes
    assert other.first_divergence == 2
    rerun = order_run("call_rerun", minted_id="call_rerun")
    assert compare_runs("a", recorded, "b", rerun).equivalent  # type: ignore[arg-type]


COHERE = "https://api.cohere.com/v2/chat"


def cohere_call(seq: int, request: dict[str, object], reply: dict[str, object]) -> object:
    body = json.dumps(request).encode()
    view = RequestView.of("POST", "https", "api.cohere.com", 443, "/v2/chat",
                          [("content-type", "application/json")], body)  # fmt: skip
    return stored_exchange(
        seq=seq,
        url=COHERE,
        request_body=body,
        response_body=json.dumps(reply).encode(),
        canonical=canonicalize(view, KeyConfig()).form,
    )


def cohere_run(answer_id: str, call_id: str) -> list[object]:
    """Cohere's Chat v2: a tool call (a UUID answer id, a ``<tool>_<random>`` call id), then
    the request that sends its result back echoing the call's id."""
    user = {"role": "user", "content": "weather in Hamburg?"}
    call = {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Hamburg"}'}}  # fmt: skip
    first = cohere_call(
        0,
        {"model": "command-a-03-2025", "messages": [user]},
        {"id": answer_id, "finish_reason": "TOOL_CALL",
         "message": {"role": "assistant", "tool_plan": "look it up", "tool_calls": [call]}},
    )  # fmt: skip
    result = {"role": "tool", "tool_call_id": call_id, "content": "sunny"}
    calling = {"role": "assistant", "tool_plan": "look it up", "tool_calls": [call]}
    second = cohere_call(
        1,
        {"model": "command-a-03-2025", "messages": [user, calling, result]},
        {"id": answer_id[::-1], "finish_reason": "COMPLETE",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]}},
    )  # fmt: skip
    return [first, second]


def test_cohere_s_unprefixed_ids_are_read_by_their_role() -> None:
    """Cohere mints a UUID per answer and ``<tool>_<random>`` per tool call, echoed in the
    next request's ``tool_call_id``: a faithful re-run with fresh ids is equivalent, and one
    echoing an id its run never minted is not."""
    recorded = cohere_run("c14c80c3-0001-4519-9460-6c92edd8cfb4", "get_weather_1gmcj7yhtb7z")
    rerun = cohere_run("5d2b7a90-77e1-4c3e-8f0b-2a9d41c6e8aa", "get_weather_8qk2m4zzp0xa")
    assert compare_runs("a", recorded, "b", rerun).equivalent  # type: ignore[arg-type]
    stray = cohere_run("5d2b7a90-77e1-4c3e-8f0b-2a9d41c6e8aa", "get_weather_other0000")
    mixed = [rerun[0], stray[1]]
    assert not compare_runs("a", recorded, "b", mixed).equivalent  # type: ignore[arg-type]
