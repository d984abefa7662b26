"""Signatures read from one exchange, as the store gives it back: the same failure reads the
same whatever its ids and numbers, each kind is told from the bytes, and a tool call's
arguments are checked against the JSON Schema its request offered, naming the rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.exchanges import stored_exchange

from freezeframe.evidence.masking import mask_text, path_template
from freezeframe.evidence.signatures import SIGNATURE_VERSION, Trace, signals_of, trace_of
from freezeframe.storage import Outcome

JSON = ((b"content-type", b"application/json"),)
CHAT = "https://api.openai.com/v1/chat/completions"
TOOL = {
    "type": "function",
    "function": {
        "name": "refund",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "integer"},
                "reason": {"enum": ["damaged", "late"]},
                "sku": {"type": "string", "pattern": "^SKU-[0-9]+$"},
            },
            "required": ["order_id"],
            "additionalProperties": False,
        },
    },
}


def chat(answer: dict[str, Any], status: int = 200, **changes: Any) -> Any:
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}
    return stored_exchange(
        seq=1,
        url=CHAT,
        request_body=json.dumps(request).encode(),
        status=status,
        response_body=json.dumps(answer).encode(),
        **changes,
    )


def asks(arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "refund", "arguments": json.dumps(arguments)}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def test_rate_limits_that_differ_only_in_numbers_share_one_signature() -> None:
    def limited(used: int, asked: int, wait: str, org: str) -> str | None:
        message = (
            f"Rate limit reached for gpt-4o in organization {org} on tokens per min (TPM): "
            f"Limit 30000, Used {used}, Requested {asked}. Please try again in {wait}."
        )
        error = {"message": message, "type": "tokens", "code": "rate_limit_exceeded"}
        return signals_of(chat({"error": error}, status=429)).signature

    first = limited(29812, 1203, "2.03s", "org-4fQx81KaZ")
    assert first == limited(29455, 1655, "7.41s", "org-9aa71ZZp02")
    assert first == (
        "provider_error POST api.openai.com/v1/chat/completions 429 tokens/rate_limit_exceeded: "
        "Rate limit reached for gpt-4o in organization {id} on tokens per min (TPM): "
        "Limit {n}, Used {n}, Requested {n}. Please try again in {n}s."
    )


def test_anthropic_errors_tool_errors_and_failures_without_an_answer() -> None:
    overloaded = stored_exchange(
        seq=2,
        url="https://api.anthropic.com/v1/messages",
        request_body=b'{"model": "claude-sonnet-4-20250514", "max_tokens": 10, "messages": []}',
        status=529,
        response_body=json.dumps(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ).encode(),
    )
    assert signals_of(overloaded).signature == (
        "provider_error POST api.anthropic.com/v1/messages 529 overloaded_error: Overloaded"
    )
    missing = stored_exchange(
        seq=3,
        method="GET",
        url="https://orders.internal/orders/8812/items",
        status=404,
        response_body=b'{"detail": "order 8812 has no items"}',
    )
    signals = signals_of(missing)
    assert (signals.kind, signals.signature, signals.trace) == (
        "tool_error",
        "tool_error GET orders.internal/orders/{id}/items 404: order {n} has no items",
        None,
    )
    refused = stored_exchange(
        seq=4,
        method="GET",
        url="https://orders.internal/orders/7",
        status=None,
        outcome=Outcome.FAILED,
        error="[Errno 111] Connect call failed ('10.0.0.7', 443)",
    )
    assert signals_of(refused).signature == (
        "upstream_failure GET orders.internal/orders/{id}: [Errno {n}] Connect call failed "
        "('{n}', {n})"
    )
    assert signals_of(stored_exchange(seq=5, method="GET", url="https://x.test/a")).kind is None


def test_truncation_and_a_prompt_near_the_window() -> None:
    cut = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "The"},
                        "finish_reason": "length"}]}  # fmt: skip
    assert signals_of(chat(cut)).signature == (
        "truncation POST api.openai.com/v1/chat/completions: finish_reason length"
    )
    full = {
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120_000, "completion_tokens": 5},
    }  # fmt: skip
    assert signals_of(chat(full)).kind == "context"
    full["usage"] = {"prompt_tokens": 100_000, "completion_tokens": 5}
    assert signals_of(chat(full)).kind is None


@pytest.mark.parametrize(
    ("arguments", "signature"),
    [
        ({"order_id": "8812"}, "schema refund $.order_id: type (integer)"),
        ({}, "schema refund $: required ('order_id')"),
        (
            {"order_id": 1, "reason": "bored"},
            "schema refund $.reason: enum (one of 'damaged', 'late')",
        ),
        ({"order_id": 1, "colour": "red"}, "schema refund $: additionalProperties"),
        ({"order_id": 1, "sku": "X-1"}, "schema refund $.sku: pattern (^SKU-[0-9]+$)"),
        ({"order_id": 1, "reason": "late", "sku": "SKU-7"}, None),
    ],
)
def test_tool_arguments_are_checked_against_the_offered_schema(
    arguments: dict[str, Any], signature: str | None
) -> None:
    assert signals_of(chat(asks(arguments))).signature == signature


def test_a_model_call_keeps_a_trace_for_run_level_readings() -> None:
    signals = signals_of(chat(asks({"order_id": 1})))
    assert signals.version == SIGNATURE_VERSION
    trace = trace_of(signals.trace)
    assert trace is not None
    assert (trace.api, trace.carried(), trace.mentions(None)) == (
        "openai.chat-completions",
        1,
        False,
    )
    [(name, key)] = trace.tool_calls()
    assert name == "refund" and key.startswith("refund:")
    same = trace_of(signals_of(chat(asks({"order_id": 1}))).trace)
    assert same is not None and same.tool_calls() == trace.tool_calls()
    assert Trace.decode(trace.encode()) == trace
    assert trace_of("not a trace") is None


def test_masking_keeps_words_and_short_names() -> None:
    assert mask_text("user 3f2a9c1e-1111-2222-3333-444455556666 hash 9f86d081884c7d65") == (
        "user {id} hash {id}"
    )
    assert path_template("/v1/threads/thread_abc123XYZ/runs/42?limit=5") == (
        "/v1/threads/{id}/runs/{id}"
    )
    assert path_template("/v1/chat/completions") == "/v1/chat/completions"


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4.1",
        "gpt-4o-2024-08-06",
        "claude-3-5-sonnet",
        "claude-3-5-sonnet-20241022",
        "o3-mini",
        "gemini-2.5-pro",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "command-r-plus-08-2024",
        "Llama-3.1-70B-Instruct",
    ],
)
def test_masking_keeps_model_names_whole(model: str) -> None:
    """``gpt-4o`` read ``gpt-{n}o`` and ``claude-3-5-sonnet`` read ``{id}`` (issue 32)."""
    assert mask_text(f"Rate limit reached for {model} after 3 tries") == (
        f"Rate limit reached for {model} after {{n}} tries"
    )


def test_masking_masks_the_number_that_ends_a_short_name() -> None:
    """``ord_500`` was kept while ``gpt-4o`` was masked: two orders are one failure."""
    assert mask_text("order ord_500 not found") == mask_text("order ord_731 not found")
    assert mask_text("order ord_500 not found") == "order ord_{n} not found"
    assert mask_text("organization org-gpt-4o7 limit") == "organization {id} limit"


def test_a_model_named_in_a_path_is_kept() -> None:
    assert path_template("/v1beta/models/gemini-2.5-pro:generateContent") == (
        "/v1beta/models/gemini-2.5-pro:generateContent"
    )
    bedrock = "/model/us.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    assert path_template(bedrock) == bedrock
    assert path_template("/openai/deployments/gpt-4o-mini/chat/completions") == (
        "/openai/deployments/gpt-4o-mini/chat/completions"
    )
    assert path_template("/orders/ord_12345678/items") == "/orders/{id}/items"
