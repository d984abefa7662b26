"""A desk agent whose fix changes its prompt, for ``recheck --live``: a model that picks the
right next step with a seeded probability, and a tool service that counts its connections.

* :class:`ChoosingModel` speaks OpenAI Chat Completions (JSON answers). Its first answer in
  a conversation asks for ``lookup_order``. Its second (after the lookup's result) depends
  on the system prompt: the agent as it ran (no ``FIX``) always asks for ``get_shipping``,
  which fails while an order is processing; with ``FIX`` it answers the user with
  probability ``right`` (drawn from ``random.Random(seed)``, one draw per such answer, so a
  test can work out every outcome from the seed) and asks for ``get_shipping`` otherwise;
  with ``REFUND`` it asks for ``get_refund``, a call no recorded run made.
* :class:`CountingTools` serves ``GET /orders/N`` (processing), ``GET /shipping/N`` (500:
  the shipping database is down) and ``GET /refunds/N``; ``connections`` counts every
  connection it accepted.
* :data:`AGENT` is the agent, a script (official openai SDK and httpx): it exits 0 when it
  answered the user, 1 when a tool failed it. It asks for ``DESK_MODEL`` (gpt-4o-mini by
  default), and the model answers as that model, with 1000 prompt tokens (``cached`` of them
  read from the prompt cache) and 100 completion tokens. A fifth argument N makes it ask the
  model N times for a plan before it starts: N more model calls than the recorded run made.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import trustme

from support.order_world import _JsonService

FIX = "Never ask for shipping while an order is processing."
REFUND = "Always check the order's refund after looking it up."
_ORDER = re.compile(r"order (\d+)")


class ChoosingModel(_JsonService):
    def __init__(self, ca: trustme.CA, *, right: float = 0.0, seed: int = 0) -> None:
        super().__init__(ca)
        self.right = right
        self.rng = random.Random(seed)
        self.draws: list[bool] = []
        self.keys: list[str] = []
        self.cached = 0
        """Prompt tokens each answer's usage counts as read from the prompt cache."""

    def reseed(self, right: float, seed: int) -> None:
        self.right, self.rng, self.draws = right, random.Random(seed), []

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        status, answer = self._choose(body)
        answer["model"] = body["model"]
        if self.cached:
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": self.cached}
        return status, answer

    def _choose(self, body: Any) -> tuple[int, dict[str, Any]]:
        messages = body["messages"]
        system = messages[0]["content"]
        order = int(_ORDER.search(messages[1]["content"]).group(1))  # type: ignore[union-attr]
        tools_answered = sum(m["role"] == "tool" for m in messages)
        if tools_answered == 0:
            return 200, _completion(order, "lookup_order", len(messages))
        if tools_answered >= 2 or "processing" not in messages[-1]["content"]:
            return 200, _completion(order, None, len(messages))
        if REFUND in system:
            return 200, _completion(order, "get_refund", len(messages))
        if FIX in system:
            picked = self.rng.random() < self.right
            self.draws.append(picked)
            if picked:
                return 200, _completion(order, None, len(messages))
        return 200, _completion(order, "get_shipping", len(messages))


def _completion(order: int, tool: str | None, n: int) -> dict[str, Any]:
    message: dict[str, Any]
    if tool is None:
        message = {"role": "assistant", "content": f"Order {order} is still being processed."}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{order}_{n}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps({"order_id": order})},
                }
            ],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{order}-{n}",
        "object": "chat.completion",
        "created": 1_795_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
    }


class CountingTools(_JsonService):
    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        kind, _, number = target.strip("/").partition("/")
        if kind == "orders":
            return 200, {"order": int(number), "status": "processing"}
        if kind == "shipping":
            return 500, {"error": f"shipping database unavailable (order {number})"}
        return 200, {"order": int(number), "refund": None}


AGENT = """
import json, os, sys
import httpx, openai

model_url, tools_url, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
run_id = os.environ.get("FREEZEFRAME_RECHECK_RUN_ID") or sys.argv[4]
order = int(run_id.rpartition("-")[2])
headers = {"X-Freezeframe-Run-Id": run_id}
client = openai.OpenAI(base_url=model_url + "/v1", default_headers=headers, max_retries=0)
tools = [
    {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"order_id": {"type": "integer"}}}}}
    for name in ("lookup_order", "get_shipping", "get_refund")
]
paths = {"lookup_order": "orders", "get_shipping": "shipping", "get_refund": "refunds"}
messages = [
    {"role": "system", "content": "You are the order desk. " + prompt},
    {"role": "user", "content": f"Where is order {order}?"},
]
model = os.environ.get("DESK_MODEL", "gpt-4o-mini")
with httpx.Client(headers=headers) as http:
    for _ in range(int(sys.argv[5]) if len(sys.argv) > 5 else 0):  # a plan it asks for first
        client.chat.completions.create(model=model, messages=messages, tools=tools)
    for _ in range(4):
        answer = client.chat.completions.create(
            model=model, messages=messages, tools=tools
        ).choices[0].message
        if not answer.tool_calls:
            print(answer.content)
            sys.exit(0)
        messages.append(answer.model_dump(exclude_none=True))
        for call in answer.tool_calls:
            number = json.loads(call.function.arguments)["order_id"]
            reply = http.get(f"{tools_url}/{paths[call.function.name]}/{number}")
            if reply.status_code >= 400:
                print(f"{call.function.name} failed: {reply.status_code}", file=sys.stderr)
                sys.exit(1)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": reply.text})
sys.exit(2)
"""
