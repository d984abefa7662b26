"""Eval rows, one per model call: what the model was shown, and what it answered.

Every model call of OpenAI Chat Completions, OpenAI Responses or Anthropic Messages (read by
evidence.conversation, streamed answers put back together) becomes one JSON line. Messages
are written in the OpenAI chat shape whichever provider served them (system, user, assistant
with ``tool_calls``, ``tool`` results), since every eval tool reads that shape::

    {"input": {"messages": [...], "tools": [...]},
     "expected": {"role": "assistant", "content": ..., "tool_calls": [...], "finish_reason": ...},
     "metadata": {"cassette", "seq", "context", "provider", "api", "model", "model_snapshot",
                  "usage", "chain"}}

``--shape`` renames the fields for a tool: ``braintrust`` (as above), ``langfuse``
(``expectedOutput``), ``phoenix`` (``output``), ``openai-chat`` (``messages`` with the answer
last, and ``tools``: the chat fine-tuning and evals format, which has no room for metadata).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from freezeframe.evidence import Conversation, conversations_of
from freezeframe.exchange_formats.jsonl import Progress
from freezeframe.exchange_formats.reading import Current, each_exchange
from freezeframe.providers.bodies import json_ready
from freezeframe.providers.messages import Message, Tool, ToolCall
from freezeframe.storage import Exchange, ReadStore

"""The values of ``export --shape``, the default first."""


def export_dataset(
    store: ReadStore, cassette: str, out: IO[bytes], shape: str, progress: Progress
) -> int:
    """Write one row per model call of the cassette; returns how many rows were written."""
    rows = 0
    exchanges = Current(each_exchange(store, cassette, progress))
    for conversation in conversations_of(exchanges):
        exchange = exchanges.current
        if conversation is None or conversation.answer is None or exchange is None:
            continue
        row = _shaped(_row(cassette, exchange, conversation), shape)
        out.write(json.dumps(row, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        rows += 1
    return rows


def _row(cassette: str, exchange: Exchange, c: Conversation) -> dict[str, Any]:
    answer = c.answer
    assert answer is not None
    expected: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.tool_calls:
        expected["tool_calls"] = [_tool_call(call) for call in answer.tool_calls]
    expected["finish_reason"] = answer.finish_reason
    if answer.error:
        expected["error"] = answer.error
    return {
        "input": {"messages": _messages(c), "tools": [_tool(tool) for tool in c.tools]},
        "expected": expected,
        "metadata": {
            "cassette": cassette,
            "seq": exchange.seq,
            "context": dict(exchange.recorded.context),
            "provider": c.provider,
            "api": c.api,
            "model": c.model,
            "model_snapshot": answer.model,
            "system_fingerprint": answer.system_fingerprint,
            "response_id": answer.response_id,
            "usage": dict(answer.usage),
            "outcome": exchange.recorded.outcome.value,
            "chain": exchange.chain,
        },
    }


def _messages(c: Conversation) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if c.system and not any(m.role in ("system", "developer") for m in c.messages):
        messages.append({"role": "system", "content": c.system})
    for message in c.messages:
        messages.extend(_message(message))
    return messages


def _message(message: Message) -> Iterator[dict[str, Any]]:
    """One message in the chat shape; tool results become ``tool`` messages of their own."""
    if message.text or message.tool_calls or not message.tool_results:
        written: dict[str, Any] = {"role": message.role, "content": message.text}
        if message.tool_calls:
            written["tool_calls"] = [_tool_call(call) for call in message.tool_calls]
        yield written
    for result in message.tool_results:
        yield {"role": "tool", "tool_call_id": result.call_id, "content": result.text}


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _tool(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = json_ready(tool.parameters)
    return {"type": "function", "function": function}


def _shaped(row: dict[str, Any], shape: str) -> dict[str, Any]:
    if shape == "langfuse":
        return {
            "input": row["input"],
            "expectedOutput": row["expected"],
            "metadata": row["metadata"],
        }
    if shape == "phoenix":
        return {"input": row["input"], "output": row["expected"], "metadata": row["metadata"]}
    if shape == "openai-chat":
        answer = {
            k: v for k, v in row["expected"].items() if k in ("role", "content", "tool_calls")
        }
        return {"messages": [*row["input"]["messages"], answer], "tools": row["input"]["tools"]}
    return row
