"""The classic case, as two local HTTPS services: an order-lookup tool and a model that
decides by what the tool told it.

* :class:`OrderService` (``GET /orders?user=U``) is backed by a small database that changes
  after the first lookup (an order ships), so a live re-run sees a different world. Its bug:
  it matches users by prefix, so ``u-1`` also gets ``u-17``'s order, first.
* :class:`ModelServer` speaks OpenAI Chat Completions with tools: with no tool result yet it
  asks for ``lookup_orders``; given one, it answers with the first order in it (so three
  candidates mean the wrong user's order). A ``careful`` model (a newer snapshot, named in
  its ``system_fingerprint``) answers with the asking user's own order instead.

:data:`AGENT` is the agent, a script run with ``python -c AGENT MODEL_BASE ORDERS_BASE USER
TOOLS_JSON``: the official openai SDK with tools, and httpx for the tool.

Both count the requests they received, so a test can assert a replay reached neither.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11
import trustme

from support.upstream import _TlsServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_orders",
            "description": "Find a user's orders.",
            "parameters": {
                "type": "object",
                "properties": {"user": {"type": "string"}},
                "required": ["user"],
            },
        },
    }
]


@dataclass(frozen=True)
class EventStream:
    """An answer that is a ``text/event-stream`` body, not a JSON document."""

    body: bytes


class _JsonService(_TlsServer):
    """HTTP/1.1 over TLS, one JSON answer per request, from ``answer`` (or an
    :class:`EventStream` it returns)."""

    def __init__(self, ca: trustme.CA) -> None:
        super().__init__(ca, ["http/1.1"])
        self.requests: list[tuple[str, str, Any]] = []

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        raise NotImplementedError  # each service answers its own way

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(65536), 30)
                conn.receive_data(data)
                if not data:
                    return
                continue
            if isinstance(event, h11.Request):
                method, target = event.method.decode(), event.target.decode()
                chunks = []
                while not isinstance(event := conn.next_event(), h11.EndOfMessage):
                    if event is h11.NEED_DATA:
                        conn.receive_data(await asyncio.wait_for(reader.read(65536), 30))
                    elif isinstance(event, h11.Data):
                        chunks.append(event.data)
                raw = b"".join(chunks)
                body = json.loads(raw) if raw else None
                self.requests.append((method, target, body))
                status, document = self.answer(method, target, body)
                content_type = "application/json"
                if isinstance(document, EventStream):
                    payload, content_type = document.body, "text/event-stream"
                else:
                    payload = json.dumps(document).encode()
                headers = [
                    ("content-type", content_type),
                    ("content-length", str(len(payload))),
                ]
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
                writer.write(conn.send(h11.Data(data=payload)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return


class OrderService(_JsonService):
    def __init__(self, ca: trustme.CA) -> None:
        super().__init__(ca)
        self.orders = [
            {"id": "ord_7001", "user": "u-17", "item": "standing desk", "status": "processing"},
            {"id": "ord_8821", "user": "u-1", "item": "monitor arm", "status": "processing"},
            {"id": "ord_9005", "user": "u-12", "item": "keyboard", "status": "delivered"},
        ]

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        parts = urlsplit(target)
        if method != "GET" or parts.path != "/orders":
            return 404, {"error": "no such endpoint"}
        user = parse_qs(parts.query).get("user", [""])[0]
        found = [dict(order) for order in self.orders if order["user"].startswith(user)]
        if len(self.requests) == 1:  # the world moves on after the first lookup
            self.orders[1]["status"] = "shipped"
        return 200, {"orders": found}


class ModelServer(_JsonService):
    def __init__(self, ca: trustme.CA, *, careful: bool = False) -> None:
        super().__init__(ca)
        self.careful = careful

    @property
    def snapshot(self) -> str:
        return "gpt-orders-2026-06" if self.careful else "gpt-orders-2026-01"

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        if method != "POST" or not target.startswith("/v1/chat/completions"):
            return 404, {"error": {"message": "no such endpoint", "type": "invalid_request"}}
        messages = body["messages"]
        results = [m for m in messages if m.get("role") == "tool"]
        n = len(self.requests)
        user = next(m for m in messages if m["role"] == "system")["content"].split()[-1]
        if not results:
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "lookup_orders", "arguments": json.dumps({"user": user})},
            }
            return 200, _completion(n, self.snapshot, body, None, [call], "tool_calls")
        result = json.loads(results[-1]["content"])
        if "orders" not in result:  # the tool failed, e.g. a replay's miss answered it
            text = f"I could not look up your orders: {json.dumps(result)[:200]}"
            return 200, _completion(n, self.snapshot, body, text, None, "stop")
        orders = result["orders"]
        if self.careful:
            orders = [order for order in orders if order["user"] == user]
        text = (
            f"Your order {orders[0]['id']} ({orders[0]['item']}) is {orders[0]['status']}."
            if orders
            else "I could not find an order for you."
        )
        return 200, _completion(n, self.snapshot, body, text, None, "stop")


def _completion(
    n: int,
    snapshot: str,
    request: Any,
    content: str | None,
    calls: list[Any] | None,
    finish: str,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-orders-{n}",
        "object": "chat.completion",
        "created": 1_790_000_000 + n,
        "model": request.get("model", "gpt-4o"),
        "system_fingerprint": f"fp_{snapshot}",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": 40 + 10 * n,
            "completion_tokens": 12,
            "total_tokens": 52 + 10 * n,
        },
    }


AGENT = r'''
"""The order-lookup agent: asks the model, runs the tool it asks for, answers the user."""
import json, sys
import httpx, openai

model_base, orders_base, user, tools = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with openai.OpenAI(base_url=model_base + "/v1", api_key="sk-orders-agent", max_retries=0) as llm:
    messages = [
        {"role": "system", "content": f"You help with orders. The user is {user}"},
        {"role": "user", "content": "Where is my latest order?"},
    ]
    for _ in range(4):
        answer = llm.chat.completions.create(
            model="gpt-4o", messages=messages, tools=json.loads(tools)
        )
        message = answer.choices[0].message
        if not message.tool_calls:
            print(message.content)
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            found = httpx.get(orders_base + "/orders", params=arguments, timeout=10).json()
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(found)}
            )
'''
