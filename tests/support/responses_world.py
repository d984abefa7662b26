"""A run chained by the OpenAI Responses API's state, as two local HTTPS services.

* :class:`ResponsesModel` speaks ``POST /v1/responses`` as OpenAI does for a stored
  conversation: every answer gets a fresh random ``resp_…`` id (and ``fc_…``/``msg_…`` item
  ids), and a request naming an unknown ``previous_response_id`` is refused with OpenAI's
  400 (``previous_response_not_found``), so a run only goes on from answers this server gave.
  Given no tool output it asks for ``lookup_orders``; given one, it answers with the first
  order in it.
* :class:`Desk` is the agent's tools: ``GET /orders?user=U`` and ``POST /notes``, where the
  agent files the model's answer under the response id it came with (as agents log answers
  for support and tracing).

:data:`AGENT` runs with ``python -c AGENT MODEL_BASE DESK_BASE TOOL_JSON [stream]``: the
official openai SDK's ``responses.create`` (or ``responses.stream``, whose answer is an event
stream) chained with ``previous_response_id``, and httpx for the tools.
"""

from __future__ import annotations

import json
import secrets
from typing import Any
from urllib.parse import parse_qs, urlsplit

from support.order_world import EventStream, _JsonService

TOOL = {
    "type": "function",
    "name": "lookup_orders",
    "description": "Find a user's orders.",
    "parameters": {
        "type": "object",
        "properties": {"user": {"type": "string"}},
        "required": ["user"],
    },
    "strict": False,
}


def _minted(kind: str) -> str:
    return f"{kind}_{secrets.token_hex(12)}"


class ResponsesModel(_JsonService):
    def __init__(self, ca: Any) -> None:
        super().__init__(ca)
        self.known: dict[str, dict[str, Any]] = {}

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        if method != "POST" or urlsplit(target).path != "/v1/responses":
            return 404, {"error": {"message": "no such endpoint", "type": "invalid_request"}}
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.known:
            return 400, {
                "error": {
                    "message": f"Previous response with id '{previous}' not found.",
                    "type": "invalid_request_error",
                    "param": "previous_response_id",
                    "code": "previous_response_not_found",
                }
            }
        items = body["input"] if isinstance(body["input"], list) else []
        outputs = [item for item in items if item.get("type") == "function_call_output"]
        if not outputs:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": _minted("fc"),
                "call_id": _minted("call"),
                "name": "lookup_orders",
                "arguments": json.dumps({"user": "u-1"}),
                "status": "completed",
            }
        else:
            orders = json.loads(outputs[-1]["output"]).get("orders") or [{}]
            text = f"Your order {orders[0].get('id')} is {orders[0].get('status')}."
            item = {
                "type": "message",
                "id": _minted("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        response = {
            "id": _minted("resp"),
            "object": "response",
            "created_at": 1_790_000_000,
            "model": body.get("model", "gpt-4.1"),
            "status": "completed",
            "previous_response_id": previous,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "output": [item],
            "usage": {
                "input_tokens": 40,
                "output_tokens": 12,
                "total_tokens": 52,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        self.known[response["id"]] = response
        if body.get("stream"):
            return 200, _events(response)
        return 200, response


def _events(response: dict[str, Any]) -> EventStream:
    """The answer as the Responses API streams it: created, each output item added and
    done, completed (response_stream_event.py)."""
    opening = response | {"status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": opening}]
    for at, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": at, "item": item})
        events.append({"type": "response.output_item.done", "output_index": at, "item": item})
    events.append({"type": "response.completed", "response": response})
    lines = [
        f"event: {event['type']}\ndata: {json.dumps(event | {'sequence_number': n})}\n\n"
        for n, event in enumerate(events)
    ]
    return EventStream("".join(lines).encode())


class Desk(_JsonService):
    def __init__(self, ca: Any) -> None:
        super().__init__(ca)
        self.notes: list[Any] = []

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        parts = urlsplit(target)
        if method == "GET" and parts.path == "/orders":
            user = parse_qs(parts.query).get("user", [""])[0]
            return 200, {"orders": [{"id": "ord_8821", "user": user, "status": "processing"}]}
        if method == "POST" and parts.path == "/notes":
            self.notes.append(body)
            return 201, {"filed": len(self.notes)}
        return 404, {"error": "no such endpoint"}


AGENT = r"""
import json, sys
import httpx, openai

model_base, desk_base, tool = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
streamed = sys.argv[4:] == ["stream"]
with openai.OpenAI(base_url=model_base + "/v1", api_key="sk-responses-agent", max_retries=0) as llm:
    def create(**asked):
        if not streamed:
            return llm.responses.create(**asked)
        with llm.responses.stream(**asked) as events:
            return events.get_final_response()

    first = create(model="gpt-4.1", input="Where is my latest order?", tools=[tool])
    call = next(item for item in first.output if item.type == "function_call")
    found = httpx.get(desk_base + "/orders", params=json.loads(call.arguments), timeout=10)
    second = create(
        model="gpt-4.1",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": found.text}],
        tools=[tool],
    )
    filed = httpx.post(
        desk_base + "/notes",
        json={"response_id": second.id, "text": second.output_text},
        timeout=10,
    )
    print(filed.status_code, second.output_text)
"""
