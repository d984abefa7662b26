"""A production day in miniature, for triage: an order agent, the model it asks, the order and
shipping tools it calls, and a plan of runs with failures planted in some of them.

* :class:`DayModel` speaks OpenAI Chat Completions (JSON answers). What it does is read from
  the first user message, ``Where is order N? [scenario]``, and from how many tool results
  the conversation carries: a healthy run asks for ``lookup_order`` once and answers; the
  planted scenarios answer 429 in the provider's error shape, stop at ``finish_reason:
  length``, ask for the same lookup again and again, write the order id as a string where
  the schema wants an integer, report a prompt near the model's window, or report a prompt
  large enough that the agent's trimming bug throws its system prompt away.
* :class:`DayTools` serves ``GET /orders/N`` (404 for the orders 9000-9099, which do not
  exist) and ``GET /shipping/N`` (500 for 7000-7099: the shipping database is down).
* :func:`order_agent` is the agent, with the official openai SDK and httpx through the
  proxy. Its bugs are the day's ignored tool errors and dropped context: it never looks at
  the shipping tool's status, and it drops the system prompt when the last prompt was large.

Every run carries its id in ``X-Freezeframe-Run-Id``; ids, numbers and pauses differ from
run to run (drawn from a seeded generator).
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import trustme

from support.order_world import _JsonService

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}},
                "required": ["order_id"],
                "additionalProperties": False,
            },
        },
    }
    for name, description in (
        ("lookup_order", "An order's status."),
        ("get_shipping", "When an order will arrive."),
    )
]
SYSTEM = "You are the order desk. Use the tools; never guess an order's status."
TRIM_AT = 50_000
"""The agent's bug: past this many prompt tokens it drops the system prompt to save room."""

PLANTED = {
    "rate_limit": "provider_error",
    "upstream": "upstream_failure",
    "truncation": "truncation",
    "tool_404": "tool_error",
    "loop": "loop",
    "schema": "schema",
    "context_window": "context",
    "dropped": "context",
    "ignored": "ignored_tool_error",
}
"""Each planted scenario and the failure kind it must come out as."""
_QUESTION = re.compile(r"order (\d+)\? \[(\w+)\]")


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    scenario: str
    """``healthy`` or one of PLANTED."""
    order: int


def plan(seed: int, *, healthy: int = 12, each: int = 3) -> list[PlannedRun]:
    """The day's runs in the order they happen: ``healthy`` healthy ones and ``each`` of
    every planted scenario, shuffled, each with its own run id and order number."""
    rng = random.Random(seed)
    scenarios = ["healthy"] * healthy + [name for name in PLANTED for _ in range(each)]
    rng.shuffle(scenarios)
    runs = []
    for scenario in scenarios:
        if scenario == "tool_404":
            order = rng.randrange(9000, 9100)
        elif scenario == "ignored":
            order = rng.randrange(7000, 7100)
        else:
            order = rng.randrange(10_000, 99_999)
        runs.append(PlannedRun(f"run-{rng.getrandbits(40):010x}", scenario, order))
    return runs


class DayModel(_JsonService):
    def __init__(self, ca: trustme.CA, seed: int) -> None:
        super().__init__(ca)
        self.rng = random.Random(seed)

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        if method != "POST" or not target.startswith("/v1/chat/completions"):
            return 404, {"error": {"message": "no such endpoint", "type": "invalid_request"}}
        time.sleep(self.rng.uniform(0, 0.02))  # timings differ from call to call
        messages = body["messages"]
        question = next(m["content"] for m in messages if m["role"] == "user")
        found = _QUESTION.search(question)
        assert found is not None, question
        order, scenario = int(found.group(1)), found.group(2)
        rounds = sum(1 for m in messages if m["role"] == "tool")
        n = len(self.requests)
        usage = self.rng.randrange(300, 2_000)
        if scenario == "rate_limit":
            return 429, _rate_limited(self.rng)
        if scenario == "truncation":
            return 200, _completion(n, "The order was sent from our", None, "length", usage)
        if scenario == "loop" and rounds < 3 + order % 3:
            return 200, _completion(n, None, _call(n, "lookup_order", order), "tool_calls", usage)
        if scenario == "schema" and rounds == 0:
            call = _call(n, "lookup_order", f"A{order}")  # a string: the schema says integer
            return 200, _completion(n, None, call, "tool_calls", usage)
        if scenario == "dropped" and rounds == 0:
            call = _call(n, "lookup_order", order)
            return 200, _completion(n, None, call, "tool_calls", 52_000 + usage)
        if scenario == "dropped" and rounds == 1:
            call = _call(n, "get_shipping", order)
            return 200, _completion(n, None, call, "tool_calls", usage)
        if scenario == "ignored" and rounds == 0:
            return 200, _completion(n, None, _call(n, "get_shipping", order), "tool_calls", usage)
        if rounds == 0:
            return 200, _completion(n, None, _call(n, "lookup_order", order), "tool_calls", usage)
        if scenario == "context_window":
            usage = 116_000 + self.rng.randrange(0, 10_000)
        return 200, _completion(n, f"Order {order} is on its way.", None, "stop", usage)


def _rate_limited(rng: random.Random) -> dict[str, Any]:
    used, asked, wait = rng.randrange(20_000, 30_000), rng.randrange(500, 3_000), rng.uniform(1, 9)
    message = (
        f"Rate limit reached for gpt-4o in organization org-{rng.getrandbits(48):012x}Qz on "
        f"tokens per min (TPM): Limit 30000, Used {used}, Requested {asked}. Please try again "
        f"in {wait:.2f}s. Visit https://platform.openai.com/account/rate-limits to learn more."
    )
    return {
        "error": {
            "message": message,
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def _call(n: int, name: str, order: int | str) -> list[dict[str, Any]]:
    arguments = json.dumps({"order_id": order})
    return [
        {
            "id": f"call_{n:04d}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
    ]


def _completion(
    n: int, content: str | None, calls: list[Any] | None, finish: str, prompt: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-day-{n}",
        "object": "chat.completion",
        "created": 1_790_000_000 + n,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_day",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20},
    }


class DayTools(_JsonService):
    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        found = re.fullmatch(r"/(orders|shipping)/([^/?]+)", target)
        if method != "GET" or found is None:
            return 404, {"error": "no such endpoint"}
        what, raw = found.groups()
        order = int(raw) if raw.isdigit() else None
        if what == "orders":
            if order is not None and 9000 <= order < 9100:
                return 404, {"error": f"order {order} not found"}
            return 200, {"order": {"id": raw, "status": "shipped"}}
        if order is not None and 7000 <= order < 7100:
            return 500, {"error": f"shipping database unavailable (shard {order % 7})"}
        return 200, {"order": raw, "eta": "2026-12-01"}


def order_agent(
    model_base: str, tools_base: str, run: PlannedRun, *, busy_reply: bool = True
) -> str:
    """One run of the agent; what it told the user. Without ``busy_reply``, a 429 is not
    caught: the agent crashes, as the day's first version did."""
    headers = {"X-Freezeframe-Run-Id": run.run_id}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Where is order {run.order}? [{run.scenario}]"},
    ]
    with (
        openai.OpenAI(
            base_url=f"{model_base}/v1",
            api_key="sk-triage-day",
            max_retries=0,
            default_headers=headers,
        ) as llm,
        httpx.Client(timeout=15, headers=headers) as http,
    ):
        last_prompt = 0
        for _ in range(8):
            if last_prompt > TRIM_AT:  # the trimming bug: the system prompt goes first
                messages = [m for m in messages if m["role"] != "system"]
            try:
                answer = llm.chat.completions.create(
                    model="gpt-4o",
                    messages=messages,  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                )
            except openai.RateLimitError:
                if not busy_reply:
                    raise
                return "The desk is busy; try again later."
            last_prompt = answer.usage.prompt_tokens if answer.usage else 0
            message = answer.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
                order = arguments.get("order_id")
                if call.function.name == "lookup_order":  # type: ignore[union-attr]
                    got = http.get(f"{tools_base}/orders/{order}")
                    content = got.text if got.is_success else f"error {got.status_code}: {got.text}"
                else:  # the other bug: the shipping tool's status is never looked at
                    got = http.get(f"{tools_base}/shipping/{order}")
                    content = json.dumps({"eta": got.json().get("eta")})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return ""
