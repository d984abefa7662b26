"""``freezeframe recheck``: the agent run again against every run of a failure group, each in
replay against that run alone; the group collapses once the fix holds for all of them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import trustme
from support.proxy import ProxyProcess, free_port
from support.triage_world import DayModel, DayTools, PlannedRun, order_agent

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
SCRIPT = """
import json, os, sys
sys.path.insert(0, {support!r})
from support.triage_world import PlannedRun, order_agent
runs = json.load(open({runs!r}))
run = PlannedRun(**runs[os.environ["FREEZEFRAME_RECHECK_RUN_ID"]])
mode = sys.argv[1]
if mode == "retry":  # a fix that is no fix: ask again at once
    try:
        order_agent({model!r}, {tools!r}, run, busy_reply=False)
    except Exception:
        order_agent({model!r}, {tools!r}, run, busy_reply=False)
print(order_agent({model!r}, {tools!r}, run, busy_reply=(mode == "fixed")))
"""


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "FREEZEFRAME_DATA_DIR": str(data_dir)},
    )


@pytest.fixture
def model(upstream_ca: trustme.CA) -> Iterator[DayModel]:
    server = DayModel(upstream_ca, 7).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tools(upstream_ca: trustme.CA) -> Iterator[DayTools]:
    service = DayTools(upstream_ca).start()
    try:
        yield service
    finally:
        service.stop()


def recheck(data_dir: Path, signature: str, script: Path, mode: str) -> tuple[int, Any]:
    ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
    done = freezeframe(
        data_dir, "recheck", signature, *ports, "--json", "--", sys.executable, str(script), mode
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_group_collapses_when_the_fix_holds_for_every_run(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    model: DayModel,
    tools: DayTools,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    runs = [
        PlannedRun("run-a1", "rate_limit", 41_001),
        PlannedRun("run-b2", "healthy", 41_002),
        PlannedRun("run-c3", "rate_limit", 41_003),
        PlannedRun("run-d4", "rate_limit", 41_004),
    ]
    proxy = start_proxy(mode="record", cassette="desk")
    client_env(proxy)
    for run in runs:
        order_agent(model.base_url, tools.base_url, run)
    assert proxy.stop() == 0
    triaged = freezeframe(data_dir, "triage", "--json")
    (group,) = json.loads(triaged.stdout)["groups"]
    assert group["runs"] == ["desk@run-a1", "desk@run-c3", "desk@run-d4"]
    model.stop()  # replay must not need it
    tools.stop()

    (tmp_path / "runs.json").write_text(json.dumps({run.run_id: asdict(run) for run in runs}))
    script = tmp_path / "agent.py"
    script.write_text(
        SCRIPT.format(
            support=str(REPO / "tests"),
            runs=str(tmp_path / "runs.json"),
            model=model.base_url,
            tools=tools.base_url,
        )
    )
    signature = group["signature"]

    code, before = recheck(data_dir, signature, script, "crashes")
    assert code == 1
    assert before["collapsed"] is False
    assert [(r["run"], r["passed"], r["status"]) for r in before["runs"]] == [
        ("desk@run-a1", False, 1),
        ("desk@run-c3", False, 1),
        ("desk@run-d4", False, 1),
    ]
    assert all(r["first_miss"] is None for r in before["runs"])

    code, retried = recheck(data_dir, signature, script, "retry")
    assert code == 1
    first_miss = retried["runs"][0]["first_miss"]
    assert first_miss is not None and first_miss["url"].endswith("/v1/chat/completions")
    assert [r["passed"] for r in retried["runs"]] == [False, False, False]

    code, after = recheck(data_dir, signature, script, "fixed")
    assert code == 0, after
    assert after["collapsed"] is True
    assert [(r["run"], r["passed"], r["status"]) for r in after["runs"]] == [
        ("desk@run-a1", True, 0),
        ("desk@run-c3", True, 0),
        ("desk@run-d4", True, 0),
    ]
    # The copies each run was replayed from are gone; the store holds what it held.
    listed = freezeframe(data_dir, "ls", "--json")
    assert [c["name"] for c in json.loads(listed.stdout)] == ["desk"]
