"""Agent steps from a real agent's run, recorded by the real proxy: the official openai SDK
streaming a tool call, the agent running the tool over HTTP, and the next model call carrying
the tool's result back, then read from the store as the case file reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.evidence.conversation import conversation_document
from freezeframe.evidence.steps import Link, Match, agent_steps, steps_document
from freezeframe.storage import Exchange, open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def weather_agent(base: str) -> dict[str, Any]:
    """A one-tool agent: it streams the model's answer, runs each tool call it asks for
    against the weather API, and sends the results back for the final answer."""
    seen: dict[str, Any] = {}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer with the weather tool."},
        {"role": "user", "content": "Lisbon"},
    ]
    with (
        openai.OpenAI(base_url=f"{base}/v1", api_key="sk-e2e-steps", max_retries=0) as client,
        httpx.Client(timeout=10) as http,
    ):
        with client.chat.completions.stream(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
        ) as stream:
            asked = stream.get_final_completion()
        calls = asked.choices[0].message.tool_calls or []
        seen["calls"] = [(c.id, c.function.name, c.function.arguments) for c in calls]  # type: ignore[union-attr]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in seen["calls"]
                ],
            }
        )
        for call_id, _, arguments in seen["calls"]:
            city = json.loads(arguments)["city"]
            weather = http.get(f"{base}/tool/counter", params={"city": city, "units": "metric"})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": weather.text})
        final = client.chat.completions.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            stream=True,
        )
        with final:
            seen["text"] = "".join(c.choices[0].delta.content or "" for c in final if c.choices)
    return seen


def recorded(proxy: ProxyProcess) -> list[Exchange]:
    with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}") as store:
        return [store.exchange("default", row.seq) for row in store.exchanges("default")]


def test_a_recorded_agent_run_links_its_tool_call_to_the_http_call_and_the_result(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record")
    client_env(proxy)
    seen = weather_agent(upstream.base_url)
    assert proxy.stop() == 0

    steps = agent_steps(recorded(proxy))
    model, tool, after = steps.steps
    assert [s.kind for s in steps.steps] == ["model", "http", "model"]

    (requested,) = model.calls
    call_id, name, arguments = seen["calls"][0]
    assert (requested.call.id, requested.call.name, requested.call.arguments) == (
        call_id,
        name,
        arguments,
    )
    assert requested.call.value == {"city": "Lisbon"}
    assert requested.result_in == Link(after.seq, Match.EXACT, f"tool_call_id {call_id}")
    assert requested.executed_by is not None
    assert requested.executed_by.seq == tool.seq
    assert requested.executed_by.match is Match.INFERRED
    assert requested.executed_by.why.startswith(
        "city 'Lisbon' as query city (1 of 1 argument values), "
    )
    assert tool.executes is not None and (tool.executes.seq, tool.executes.call) == (model.seq, 0)

    asked = model.conversation
    assert asked is not None and asked.answer is not None
    assert asked.answer.streamed and asked.answer.complete
    assert asked.answer.finish_reason == "tool_calls"
    assert asked.system == "Answer with the weather tool."
    assert asked.context is not None and asked.context.window == 128_000
    carried = after.conversation
    assert carried is not None and carried.answer is not None
    assert [(r.call_id, json.loads(r.text)["echo"]) for r in carried.tool_results()] == [
        (call_id, {"city": "Lisbon", "units": "metric"})
    ]
    assert carried.answer.text == seen["text"]
    assert json.dumps(steps_document(steps)) and json.dumps(conversation_document(carried))
