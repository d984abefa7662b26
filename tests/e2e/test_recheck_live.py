"""``freezeframe recheck GROUP --live``: a fix that changes the prompt, checked against a live
model N times per run while every tool stays frozen, with a verdict and a Wilson interval per
run and for the group."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from support.desk_world import AGENT, FIX, REFUND, ChoosingModel, CountingTools
from support.proxy import ProxyProcess, free_port

from freezeframe.sandbox.recheck import wilson

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
KEY = "sk-live-recheck-0123456789abcdef"
RUNS = ("run-1042", "run-1077")


@pytest.fixture
def model(upstream_ca: trustme.CA) -> Iterator[ChoosingModel]:
    server = ChoosingModel(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tools(upstream_ca: trustme.CA) -> Iterator[CountingTools]:
    service = CountingTools(upstream_ca).start()
    try:
        yield service
    finally:
        service.stop()


def freezeframe(
    data_dir: Path, *args: str, ca: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "FREEZEFRAME_DATA_DIR": str(data_dir)}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # a worktree's code, when it is run
    env["OPENAI_API_KEY"] = KEY  # the live calls' credentials, from recheck's environment
    if ca is not None:
        env["FREEZEFRAME_UPSTREAM_CA"] = str(ca)
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )


def test_verdicts_with_a_live_model_and_frozen_tools(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    model: ChoosingModel,
    tools: CountingTools,
    data_dir: Path,
    tmp_path: Path,
    upstream_ca: trustme.CA,
    upstream_ca_file: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proxy = start_proxy(mode="record", cassette="desk")
    env = {**client_env(proxy), "OPENAI_API_KEY": KEY, "PYTHONPATH": ""}
    for run_id in RUNS:
        done = subprocess.run(
            [sys.executable, str(script), model.base_url, tools.base_url, "", run_id],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr  # the shipping tool's 500 fails it
    assert proxy.stop() == 0
    (group,) = json.loads(freezeframe(data_dir, "triage", "--json").stdout)["groups"]
    assert group["runs"] == [f"desk@{run}" for run in RUNS]
    contacted = tools.connections

    def recheck(prompt: str, tries: int, *more: str) -> tuple[int, dict[str, Any], str]:
        ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
        command = [sys.executable, str(script), model.base_url, tools.base_url, prompt, "-"]
        done = freezeframe(
            data_dir,
            "recheck",
            "1",  # the group's number as triage lists it
            "--live",
            "--tries",
            str(tries),
            *ports,
            *more,
            "--json",
            "--",
            *command,
            ca=upstream_ca_file,
        )
        assert done.stdout, done.stderr
        return done.returncode, json.loads(done.stdout), done.stderr

    def tallied(document: dict[str, Any], tries: int, passed: int) -> None:
        assert (document["tries"], document["passed"]) == (tries, passed)
        assert math.isclose(document["flip_rate"], round(passed / tries, 4))
        low, high = wilson(passed, tries)
        assert document["interval"] == [round(low, 4), round(high, 4)]

    # The agent as it ran: the model still asks for shipping; no try passes.
    code, report, said = recheck("", 2)
    assert code == 1
    assert "going live: 8 model calls (gpt-4o-mini), about $0.0017" in said
    assert report["estimate"]["live_calls"] == 8
    assert [r["verdict"] for r in report["runs"]] == ["still_failing", "still_failing"]
    tallied(report, 4, 0)
    for run in report["runs"]:
        tallied(run, 2, 0)

    # The fix, with a model that now always answers: fixed, every try.
    model.reseed(1.0, 7)
    code, report, _ = recheck(FIX, 3)
    assert code == 0, report
    assert report["collapsed"] is True
    assert [r["verdict"] for r in report["runs"]] == ["fixed", "fixed"]
    tallied(report, 6, 6)
    assert report["interval"][0] == pytest.approx(0.6097, abs=1e-4)  # 6 of 6 is not certainty
    each = report["runs"][0]["tries_done"]
    assert [t["live_calls"] for t in each] == [2, 2, 2]
    assert [t["cassette"] for t in each] == [
        each[0]["cassette"].rpartition("-")[0] + f"-{n}" for n in (1, 2, 3)
    ]

    # The fix with a model that answers right half the time: every draw worked out from
    # the seed, one per try, runs in order.
    seed, tries = 13, 4
    rng = random.Random(seed)
    draws = [rng.random() < 0.5 for _ in range(2 * tries)]
    expected = [sum(draws[:tries]), sum(draws[tries:])]
    assert expected == [1, 4]  # seed 13: one run flaky, the other fixed by chance
    model.reseed(0.5, seed)
    code, report, _ = recheck(FIX, tries)
    assert model.draws == draws
    assert code == 1
    assert [r["verdict"] for r in report["runs"]] == ["flaky", "fixed"]
    for n, (run, passed) in enumerate(zip(report["runs"], expected, strict=True)):
        tallied(run, tries, passed)
        assert [t["passed"] for t in run["tries_done"]] == draws[n * tries : (n + 1) * tries]
    tallied(report, 2 * tries, sum(expected))

    # A fix that makes the agent ask for a call no run made: diverged, and the call named.
    code, report, _ = recheck(REFUND, 2)
    assert code == 1
    assert [r["verdict"] for r in report["runs"]] == ["diverged", "diverged"]
    for run, run_id in zip(report["runs"], RUNS, strict=True):
        (call,) = run["diverged"]
        assert call == f"GET {tools.base_url}/refunds/{run_id.rpartition('-')[2]}"
        tallied(run, 2, 0)

    # The case file's triage page shows the group's last recheck.
    casefile = start_proxy(mode="replay", cassette="desk")
    (shown_group,) = casefile.admin("GET", "/triage.json").json()["groups"]
    last = shown_group["last_recheck"]
    assert last["summary"] == (
        "live: 0 of 4 tries passed, flip rate 0.00 (95% 0.00-0.49); 2 diverged"
    )
    assert last["document"]["runs"][0]["diverged"] == report["runs"][0]["diverged"]
    page = casefile.admin("GET", "/triage").text
    assert "last recheck" in page and "2 diverged" in page
    assert casefile.stop() == 0

    # Another model, through --model-url: the recorded one hears nothing of it.
    other = ChoosingModel(upstream_ca, right=1.0, seed=3).start()
    try:
        asked = len(model.requests)
        code, report, _ = recheck(FIX, 1, "--model-url", other.base_url)
        assert code == 0, report
        assert [r["verdict"] for r in report["runs"]] == ["fixed", "fixed"]
        assert len(other.requests) == 4 and len(model.requests) == asked
    finally:
        other.stop()

    # The tools were never contacted; the model was, with the key from recheck's environment,
    # and no cassette holds it.
    assert tools.connections == contacted
    assert model.requests
    tried = report["runs"][0]["tries_done"][0]["cassette"]
    shown = freezeframe(data_dir, "show", tried, "0", "--json")
    assert shown.returncode == 0, shown.stderr
    assert KEY not in shown.stdout


def test_the_limits_refuse_before_anything_goes_live_and_stop_a_fix_that_outgrows_them(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    model: ChoosingModel,
    tools: CountingTools,
    data_dir: Path,
    tmp_path: Path,
    upstream_ca_file: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proxy = start_proxy(mode="record", cassette="desk")
    env = {**client_env(proxy), "OPENAI_API_KEY": KEY, "PYTHONPATH": ""}
    for run_id in RUNS:
        done = subprocess.run(
            [sys.executable, str(script), model.base_url, tools.base_url, "", run_id],
            env={**os.environ, **env},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 1
    assert proxy.stop() == 0
    asked = len(model.requests)
    command = ["--", sys.executable, str(script), model.base_url, tools.base_url, FIX, "-"]

    over = freezeframe(data_dir, "recheck", "1", "--live", "--max-live-calls", "19", *command)
    assert over.returncode == 1
    assert over.stderr.strip().splitlines()[-1] == (
        "freezeframe: error: --max-live-calls 19: the recheck would make about 20 live model "
        "calls; lower --tries or raise the limit"
    )
    poor = freezeframe(data_dir, "recheck", "1", "--live", "--budget", "0.004", *command)
    assert poor.returncode == 1
    assert "--budget 0.004: the recheck would cost about $0.0042" in poor.stderr
    assert len(model.requests) == asked  # nothing went live

    # A fix that asks the model for a plan first makes 3 calls a try where the recording made
    # 2: the estimate (2 runs, 2 tries, 2 calls) fits the limits, the tries do not. The next
    # try is not started once it would pass a limit, and the table shows what ran.
    model.reseed(1.0, 5)
    planning = [*command, "1"]

    def recheck(*limits: str) -> subprocess.CompletedProcess[str]:
        ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
        return freezeframe(
            data_dir,
            "recheck",
            "1",
            "--live",
            "--tries",
            "2",
            *ports,
            *limits,
            *planning,
            ca=upstream_ca_file,
        )

    done = recheck("--max-live-calls", "8")
    assert done.returncode == 1, done.stderr
    assert len(model.requests) == asked + 6  # run-1042's two tries; a third try would pass 8
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("fixed         desk@run-1042: 2 of 2 tries passed")
    assert lines[1].startswith("2 of 2 tries passed over 1 runs")
    assert lines[1].endswith("the group is not fixed")
    assert done.stderr.strip().splitlines()[-1] == (
        "freezeframe: stopped early: --max-live-calls 8: 6 live model calls made, and the next "
        "try would make about 3 more; not tried: desk@run-1077"
    )

    # The budget is held to what the live answers say they cost: 800 of each call's 1000
    # prompt tokens now come from the cache, so a try costs $0.00045 where the recording
    # priced it at $0.00063, and a third try fits where it would not have.
    model.cached = 800
    asked = len(model.requests)
    done = recheck("--budget", "0.0017", "--json")  # the estimate: 8 calls, about $0.0017
    assert done.returncode == 1, done.stderr
    assert len(model.requests) == asked + 9
    report = json.loads(done.stdout)
    assert [(r["run"], r["verdict"], r["tries"]) for r in report["runs"]] == [
        ("desk@run-1042", "fixed", 2),
        ("desk@run-1077", "fixed", 1),
    ]
    assert (report["tries"], report["passed"], report["untried"]) == (3, 3, [])
    assert report["collapsed"] is False  # stopped short of the tries asked for
    assert report["stopped"].startswith("--budget 0.0017: about $0.001")


def test_the_estimate_prices_from_the_shipped_table_and_names_an_unknown_model(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    model: ChoosingModel,
    tools: CountingTools,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    model.cached = 800  # of each call's 1000 prompt tokens
    proxy = start_proxy(mode="record", cassette="desk")
    env = {**client_env(proxy), "OPENAI_API_KEY": KEY, "PYTHONPATH": ""}
    for run_id, name in zip(RUNS, ("gpt-4.1-mini-2025-04-14", "desk-llm-7b"), strict=True):
        done = subprocess.run(
            [sys.executable, str(script), model.base_url, tools.base_url, "", run_id],
            env={**os.environ, **env, "DESK_MODEL": name},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 1
    assert proxy.stop() == 0
    asked = len(model.requests)
    command = ["--", sys.executable, str(script), model.base_url, tools.base_url, FIX, "-"]

    done = freezeframe(
        data_dir, "recheck", "1", "--live", "--tries", "3", "--budget", "1", *command
    )

    # gpt-4.1-mini's prices from LiteLLM's table, cached prompt tokens at the cache price:
    # 2 calls a try, 3 tries; the unknown model's 6 calls are counted apart, never guessed.
    table = json.loads((REPO / "providers" / "model_prices.json").read_text())["models"]
    price = table["gpt-4.1-mini-2025-04-14"]
    one = (
        200 * price["input_cost_per_token"]
        + 800 * price["cache_read_input_token_cost"]
        + 100 * price["output_cost_per_token"]
    )
    assert (
        "going live: 12 model calls (desk-llm-7b, gpt-4.1-mini-2025-04-14), "
        f"about ${6 * one:.4f} plus 6 calls with no known price"
    ) in done.stderr
    assert done.returncode == 1
    assert "--budget 1: 6 of the 12 model calls have no known price" in done.stderr
    assert len(model.requests) == asked  # nothing went live
