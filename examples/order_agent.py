"""The order-lookup agent of the README's pytest example: the official openai SDK with a
tool, and httpx to call the tool.

The order service matches users by prefix, so a lookup for ``u-1`` also returns ``u-17``'s
orders; the agent keeps only the asking user's before the model sees them. That line is the
fix the example's test locks in.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

TOOLS: list[Any] = [
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


def latest_order(model_base: str, orders_base: str, user: str) -> str:
    """Ask the model where ``user``'s latest order is, running the tool it asks for."""
    with openai.OpenAI(base_url=model_base + "/v1", api_key="sk-orders", max_retries=0) as llm:
        messages: list[Any] = [
            {"role": "system", "content": f"You help with orders. The user is {user}"},
            {"role": "user", "content": "Where is my latest order?"},
        ]
        for _ in range(4):
            answer = llm.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
            message = answer.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                found = httpx.get(orders_base + "/orders", params={"user": user}, timeout=10)
                orders = [o for o in found.json()["orders"] if o["user"] == user]
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": json.dumps({"orders": orders}),
                    }
                )
        return ""
