"""Traffic as real agents send it, made by the real clients, for every reader to be run over.

    with McpServer() as mcp:
        sent = send_corpus(upstream, mcp.url)   # through whatever proxy the env points at

Each piece is what an installed client really puts on the wire, not a hand-written body:

* openai: chat with tools (``user``, ``metadata``, a tool call and the ``tool_call_id`` that
  echoes it), the same streamed with ``stream_options``, and an SDK retry of a retryable 429;
* anthropic: messages with ``metadata`` and tools (``tool_use`` then ``tool_result``),
  streamed and whole;
* mcp (the official SDK, streamable HTTP): the handshake, ``tools/list`` and ``tools/call``
  with JSON-RPC ids, SSE answers, and the SDK closing each answer once it has read it;
* requests and httpx: gzip- and brotli-encoded answers, an SSE stream the client stops
  reading after its first event, and side traffic no agent code asked for (a trace export in
  the Agents SDK's shape, with fresh ids and timestamps each run).

The clients are made inside each call, after the test has pointed the environment at a
proxy: the SDKs read ``HTTPS_PROXY`` and ``SSL_CERT_FILE`` when they are constructed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anthropic
import httpx
import openai
import requests
from mcp.client.client import Client as McpClient

from support.upstream import Upstream

__all__ = ["PIECES", "send_corpus", "send_mcp", "send_side_traffic"]

TIMEOUT = 20.0
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ANTHROPIC_WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": WEATHER["function"]["parameters"],  # type: ignore[index]
}


def _openai(upstream: Upstream, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=upstream.url("/v1"), api_key="sk-corpus", max_retries=retries, timeout=TIMEOUT
    )


def _anthropic(upstream: Upstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=upstream.base_url, api_key="sk-ant-corpus", max_retries=0, timeout=TIMEOUT
    )


def send_openai(upstream: Upstream) -> None:
    """A tool-using chat, whole then streamed, with the bookkeeping fields SDK users set."""
    client = _openai(upstream)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,
        tools=[WEATHER],  # type: ignore[list-item]
        user="user-1234",
        metadata={"agent": "corpus", "run": secrets.token_hex(4)},
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"city": "Paris", "sky": "clear"}'},
    ]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, user="user-1234")
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Say something short."}],
        stream=True,
        stream_options={"include_usage": True},
        user="user-1234",
    )
    for _ in stream:
        pass


def send_openai_retry(upstream: Upstream) -> None:
    """The SDK's own retry of a retryable 429: two attempts on the wire, one error in code."""
    client = _openai(upstream, retries=1)
    try:
        client.post(
            upstream.url("/ratelimited/full?retryable=1"),
            cast_to=object,
            body={"model": "gpt-4o-mini", "input": "hello"},
        )
    except openai.RateLimitError:
        return
    raise AssertionError("/ratelimited/full answered without a 429")


def send_anthropic(upstream: Upstream) -> None:
    """A tool use and its result, with the ``metadata.user_id`` Anthropic asks callers for."""
    client = _anthropic(upstream)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = client.messages.create(
        model="claude-opus-4-7",
        max_tokens=256,
        messages=messages,
        tools=[ANTHROPIC_WEATHER],  # type: ignore[list-item]
        metadata={"user_id": "user-5678"},
    )
    use = next(block for block in first.content if block.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "snow"}],
        },
    ]
    with client.messages.stream(
        model="claude-opus-4-7",
        max_tokens=256,
        messages=messages,
        metadata={"user_id": "user-5678"},
    ) as stream:
        stream.until_done()


def send_mcp(url: str) -> None:
    """The official MCP client over streamable HTTP, in both protocol generations."""

    async def session(mode: str) -> None:
        async with McpClient(url, mode=mode) as client:
            await client.list_tools()
            await client.call_tool("lookup", {"q": "corpus"})
            await client.call_tool("add", {"a": 2, "b": 3})

    async def both() -> None:
        await asyncio.wait_for(session("legacy"), TIMEOUT)
        await asyncio.wait_for(session("auto"), TIMEOUT)

    asyncio.run(both())


def send_encoded(upstream: Upstream) -> None:
    """Compressed answers, read by requests (gzip) and httpx (brotli)."""
    requests.get(upstream.url("/gzip"), timeout=TIMEOUT).raise_for_status()
    with httpx.Client(timeout=TIMEOUT) as client:
        client.get(upstream.url("/encoded/br")).raise_for_status()


def send_early_close(upstream: Upstream) -> None:
    """A client that has what it wanted from an SSE stream and closes it before the end."""
    with (
        httpx.Client(timeout=TIMEOUT) as client,
        client.stream("GET", upstream.url("/sse/slow?events=6&gap_ms=150")) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data:"):
                break


def send_side_traffic(upstream: Upstream) -> None:
    """What the OpenAI Agents SDK exports after a run on its own: trace and span ids it mints
    and the times the spans started and ended, different in every run."""
    now = datetime.now(UTC).isoformat()
    trace = f"trace_{secrets.token_hex(16)}"
    body = {
        "data": [
            {"object": "trace", "id": trace, "workflow_name": "Agent workflow", "group_id": None},
            {
                "object": "trace.span",
                "id": f"span_{secrets.token_hex(12)}",
                "trace_id": trace,
                "parent_id": None,
                "started_at": now,
                "ended_at": now,
                "span_data": {"type": "agent", "name": "Assistant", "tools": ["get_weather"]},
                "error": None,
            },
        ]
    }
    with httpx.Client(timeout=TIMEOUT) as client:
        client.post(
            upstream.url("/v1/traces/ingest"),
            content=json.dumps(body),
            headers={
                "authorization": "Bearer sk-corpus",
                "content-type": "application/json",
                "openai-beta": "traces=v1",
            },
        ).raise_for_status()


PIECES: dict[str, Callable[[Upstream], None]] = {
    "openai": send_openai,
    "openai-retry": send_openai_retry,
    "anthropic": send_anthropic,
    "encoded": send_encoded,
    "early-close": send_early_close,
    "side-traffic": send_side_traffic,
}


def send_corpus(upstream: Upstream, mcp_url: str) -> None:
    """Every piece, in order: the model providers first, MCP, then the rest."""
    for piece in PIECES.values():
        piece(upstream)
    send_mcp(mcp_url)
