"""The classic case, end to end: an agent returns another user's order; re-enact it, edit the
tool's answer, re-run the model against the frozen tools, and compare the runs.

The order service is stopped once the incident is recorded: every later run answers the tool
from a cassette, and the service's request count proves it was never asked again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import trustme
from support.order_world import AGENT, TOOLS, ModelServer, OrderService
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

WRONG = "Your order ord_7001 (standing desk) is processing."
RIGHT = "Your order ord_8821 (monitor arm) is processing."
REPO = Path(__file__).parents[2]


@pytest.fixture
def orders(upstream_ca: trustme.CA) -> Iterator[OrderService]:
    service = OrderService(upstream_ca).start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
def model(upstream_ca: trustme.CA) -> Iterator[ModelServer]:
    server = ModelServer(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


def run_agent(proxy: ProxyProcess, model: ModelServer, orders: OrderService) -> str:
    from freezeframe.proxy.trust import client_bundle

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= proxy.client_env(client_bundle(proxy.data_dir))
    done = subprocess.run(
        [sys.executable, "-c", AGENT, model.base_url, orders.base_url, "u-1", json.dumps(TOOLS)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_the_order_lookup_case_replayed_edited_and_rerun_against_frozen_tools(
    start_proxy: Callable[..., ProxyProcess],
    model: ModelServer,
    orders: OrderService,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="orders-bug")
    assert run_agent(recorder, model, orders) == WRONG, "the incident: another user's order"
    recorder.stop()
    orders.stop()
    model_calls = len(model.requests)
    assert (model_calls, len(orders.requests)) == (2, 1)

    # 1. Replay re-enacts the wrong answer, the order service stopped, nothing upstream.
    replayer = start_proxy(mode="replay", cassette="orders-bug")
    assert run_agent(replayer, model, orders) == WRONG
    replayer.stop()
    assert len(model.requests) == model_calls

    # 2. The tool's answer edited to the one right order: the agent answers correctly. The
    # model is live once the run leaves the recording (its second call carries the edit).
    right_order = json.dumps(
        [{"id": "ord_8821", "user": "u-1", "item": "monitor arm", "status": "processing"}]
    )
    edited = freezeframe(
        data_dir,
        "edit",
        "orders-bug",
        "1",
        "--into",
        "orders-fix1",
        "--set",
        f"$.orders={right_order}",
    )
    assert edited.returncode == 0, edited.stderr
    assert "$.orders: [" in edited.stdout
    model_host = model.base_url.removeprefix("https://")
    fixed = start_proxy(
        mode="replay",
        cassette="orders-fix1",
        args=("--live", model_host, "--after-miss", "live"),
    )
    assert run_agent(fixed, model, orders) == RIGHT
    fixed.stop()
    assert len(model.requests) == model_calls + 1, "only the call after the edit went live"
    shown = json.loads(freezeframe(data_dir, "show", "orders-fix1", "1", "--json").stdout)
    assert shown["origin"]["kind"] == "edited" and shown["origin"]["seq"] == 1
    verified = freezeframe(data_dir, "verify", "orders-fix1")
    assert verified.returncode == 0, verified.stderr

    # 3. A newer model live against the frozen tools, recorded into a cassette of its own.
    model.careful = True
    rerun = start_proxy(
        mode="replay",
        cassette="orders-bug",
        args=("--live", model_host, "--record-into", "orders-careful"),
    )
    assert run_agent(rerun, model, orders) == RIGHT
    rerun.stop()
    assert len(model.requests) == model_calls + 3
    rows = json.loads(freezeframe(data_dir, "show", "orders-careful", "--json").stdout)
    assert [row["origin"] for row in rows] == [None, "replayed", None]

    # diff names the step where the runs part: the final answer, not the frozen tool.
    compared = freezeframe(data_dir, "diff", "orders-bug", "orders-careful", "--json")
    assert compared.returncode == 1, compared.stderr
    report = json.loads(compared.stdout)
    assert report["first_divergence"] == 2
    first, tool, last = report["steps"]
    assert (first["kind"], first["diverges"], first["request"], first["answer"]) == (
        "model", False, [], []
    )  # fmt: skip
    assert {c["what"] for c in first["metadata"]} >= {"system_fingerprint"}
    assert (tool["kind"], tool["diverges"]) == ("http", False), "the tool was frozen"
    assert last["diverges"] and last["answer"][0] == {"what": "text", "a": WRONG, "b": RIGHT}
    text = freezeframe(data_dir, "diff", "orders-bug", "orders-careful").stdout
    assert text.startswith("orders-bug and orders-careful diverge at step 3 (#2 / #2)")
    same = freezeframe(data_dir, "diff", "orders-bug", "orders-bug")
    assert same.returncode == 0 and "equivalent" in same.stdout

    # The new run replays on its own, the model stopped too this time.
    model.stop()
    alone = start_proxy(mode="replay", cassette="orders-careful")
    assert run_agent(alone, model, orders) == RIGHT

    # 4. The order service was asked once, when the incident was recorded.
    assert len(orders.requests) == 1


def test_nothing_goes_upstream_that_no_route_names(
    start_proxy: Callable[..., ProxyProcess],
    model: ModelServer,
    orders: OrderService,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="orders")
    run_agent(recorder, model, orders)
    recorder.stop()
    before = (len(model.requests), len(orders.requests), orders.connections)

    # Only the model is live: the tool's lookup is a miss when it is not recorded.
    model_host = model.base_url.removeprefix("https://")
    proxy = start_proxy(
        mode="replay", cassette="orders", args=("--live", model_host, "--record-into", "new")
    )
    model.careful = True
    done = subprocess.run(
        [sys.executable, "-c", AGENT, model.base_url, orders.base_url, "u-12", json.dumps(TOOLS)],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        | proxy.client_env(proxy.data_dir / "ca-bundle.pem"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("I could not look up your orders:")
    assert "freezeframe_replay_miss" in done.stdout, "the tool's lookup was a miss"
    proxy.stop()
    assert (len(orders.requests), orders.connections) == before[1:], "the tool was not asked"
    assert len(model.requests) == before[0] + 2, "the live model was, twice"


def test_resend_asks_a_newer_model_the_exact_same_request(
    start_proxy: Callable[..., ProxyProcess],
    model: ModelServer,
    orders: OrderService,
    data_dir: Path,
    upstream_ca_file: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="orders")
    run_agent(recorder, model, orders)
    recorder.stop()
    model.careful = True
    asked = len(model.requests)

    refused = freezeframe(data_dir, "resend", "orders", "2", "--into", "orders-resent")
    assert refused.returncode == 1
    assert "the recorded authorization header is stored redacted" in refused.stderr.lower()
    assert len(model.requests) == asked

    resent = freezeframe(
        data_dir, "resend", "orders", "2", "--into", "orders-resent",
        "--set", '$.model="gpt-4o-2026-06"',
        "--header", "Authorization: Bearer sk-resend-0123456789abcdefghij",
        "--upstream-ca", str(upstream_ca_file), "--json",
    )  # fmt: skip
    assert resent.returncode == 0, resent.stderr
    report = json.loads(resent.stdout)
    assert (report["cassette"], report["seq"], report["status"]) == ("orders-resent", 0, 200)
    changed = {what: (old, new) for what, old, new in report["differences"]}
    assert changed["$.choices[0].message.content"] == (f'"{WRONG}"', f'"{RIGHT}"')
    assert changed["$.system_fingerprint"] == ('"fp_gpt-orders-2026-01"', '"fp_gpt-orders-2026-06"')
    assert model.requests[-1][2]["model"] == "gpt-4o-2026-06", "the request went with the change"
    assert len(model.requests) == asked + 1 and len(orders.requests) == 1
    shown = json.loads(freezeframe(data_dir, "show", "orders-resent", "0", "--json").stdout)
    assert shown["origin"]["kind"] == "resent" and shown["origin"]["seq"] == 2
    assert "sk-resend" not in json.dumps(shown), "the key given again was never stored"


def test_diff_of_an_edited_fork_reads_its_copied_requests_as_recorded(
    start_proxy: Callable[..., ProxyProcess],
    model: ModelServer,
    orders: OrderService,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    """The model's first answer edited to a 429 no longer mints the tool call's id, which
    the fork's later request, copied byte for byte, still echoes: diff says only the edited
    answer differs, not ``"⟨call_ 1⟩" -> "call_1"`` in a request nobody changed (#32)."""
    recorder = start_proxy(mode="record", cassette="first-run")
    assert run_agent(recorder, model, orders) == WRONG
    recorder.stop()
    limited = tmp_path / "rate-limited.json"
    limited.write_text(json.dumps({"error": {"message": "Rate limit", "type": "rate_limit"}}))
    edited = freezeframe(
        data_dir, "edit", "first-run", "0", "--into", "first-run-429",
        "--status", "429", "--response-body", str(limited),
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr

    compared = freezeframe(data_dir, "diff", "first-run", "first-run-429", "--json")
    assert compared.returncode == 1, compared.stderr
    report = json.loads(compared.stdout)
    assert report["first_divergence"] == 0, "the edited answer"
    assert [step["request"] for step in report["steps"]] == [[], [], []]
    assert {c["what"] for c in report["steps"][0]["answer"]} >= {"status"}
    assert [step["diverges"] for step in report["steps"][1:]] == [False, False]
    text = freezeframe(data_dir, "diff", "first-run", "first-run-429").stdout
    assert "⟨" not in text and "request $." not in text, text


LOOKUP = {
    "name": "lookup_orders",
    "description": "Find a user's orders.",
    "input_schema": TOOLS[0]["function"]["parameters"],
}


def stream_agent(base: str) -> dict[str, Any]:
    """Four streamed model calls, read as agents read them: OpenAI text chunk by chunk and a
    tool call accumulated by the SDK; Anthropic text deltas and a tool_use's parsed input."""
    ask = [{"role": "user", "content": "u-1"}]
    seen: dict[str, Any] = {}
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-stream-0123456789abcdef") as llm:
        chunks = list(llm.chat.completions.create(model="gpt-4o", messages=ask, stream=True))
        seen["openai_text"] = "".join(c.choices[0].delta.content or "" for c in chunks)
        seen["openai_ids"] = {(c.id, c.model, c.system_fingerprint) for c in chunks}
        with llm.chat.completions.stream(model="gpt-4o", messages=ask, tools=TOOLS) as stream:
            call = stream.get_final_completion().choices[0].message.tool_calls[0]  # type: ignore[index]
        seen["openai_call"] = (call.id, call.function.name, json.loads(call.function.arguments))  # type: ignore[union-attr]
    with anthropic.Anthropic(base_url=base, api_key="sk-ant-stream-0123456789abcdef") as claude:
        with claude.messages.stream(model="claude-x", max_tokens=50, messages=ask) as stream:
            seen["anthropic_text"] = "".join(stream.text_stream)
            seen["anthropic_id"] = stream.get_final_message().id
        with claude.messages.stream(
            model="claude-x", max_tokens=50, messages=ask, tools=[LOOKUP]
        ) as stream:
            block = stream.get_final_message().content[0]
        assert block.type == "tool_use"
        seen["anthropic_call"] = (block.id, block.name, block.input)
    return seen


def test_edited_streams_are_what_the_sdks_stream_in_replay(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="streams")
    client_env(recorder)
    recorded = stream_agent(upstream.base_url)
    recorder.stop()
    assert recorded["openai_call"] == ("call_2_0", "lookup_orders", {"user": "u-1"})
    assert recorded["anthropic_call"] == ("toolu_2_0", "lookup_orders", {"user": "u-1"})

    # The OpenAI text and the Anthropic tool input edited with the CLI...
    edited = freezeframe(
        data_dir, "edit", "streams", "0", "--into", "streams-a",
        "--set", '$.choices[0].message.content="Your order ord_8821 is processing."',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    assert '"answer 1 to: u-1" -> "Your order ord_8821 is processing."' in edited.stdout
    edited = freezeframe(
        data_dir, "edit", "streams-a", "3", "--into", "streams-b",
        "--set", '$.content[0].input={"user": "u-17"}',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr

    # ...the OpenAI tool call's arguments and the Anthropic text through the admin API.
    replayer = start_proxy(mode="replay", cassette="streams-b")
    client_env(replayer)
    for source, seq, into, assignment in [
        ("streams-b", 1, "streams-c", '$.choices[0].message.tool_calls[0].function.arguments='
         '"{\\"user\\": \\"u-17\\"}"'),
        ("streams-c", 2, "streams-d", '$.content[0].text="Your order ord_8821 is processing."'),
    ]:  # fmt: skip
        made = replayer.admin(
            "POST", f"/api/cassettes/{source}/{seq}/edit", json={"into": into, "set": [assignment]}
        )
        assert made.status_code == 201, made.text
    switched = replayer.admin("PUT", "/api/mode", json={"cassette": "streams-d"})
    assert switched.status_code == 200
    replayed = stream_agent(upstream.base_url)
    assert replayed == recorded | {
        "openai_text": "Your order ord_8821 is processing.",
        "openai_call": ("call_2_0", "lookup_orders", {"user": "u-17"}),
        "anthropic_text": "Your order ord_8821 is processing.",
        "anthropic_call": ("toolu_2_0", "lookup_orders", {"user": "u-17"}),
    }, "the ids, models and fingerprints as recorded; the content as edited"
    assert freezeframe(data_dir, "verify", "streams-d").returncode == 0


def test_set_on_a_stream_that_cannot_be_re_encoded_is_refused_in_one_line(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="ticks")
    client_env(recorder)
    with httpx.Client() as client:
        assert client.get(f"{upstream.base_url}/sse/slow?events=3&gap_ms=1").status_code == 200
    recorder.stop()
    refused = freezeframe(data_dir, "edit", "ticks", "0", "--into", "t2", "--set", "$.n=1")
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()
    assert "cannot be re-encoded" in line and "a stream of generic" in line
    assert "Traceback" not in refused.stderr
