"""Triage on a synthetic production day recorded through the real proxy, and imported again
as a HAR file: every planted failure comes out as exactly one group holding exactly its
runs, and no healthy run is in any group."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from support.proxy import ProxyProcess, free_port
from support.triage_world import PLANTED, DayModel, DayTools, PlannedRun, order_agent, plan

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
SEED = 24


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.fixture
def model(upstream_ca: trustme.CA) -> Iterator[DayModel]:
    server = DayModel(upstream_ca, SEED).start()
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


def record_day(
    proxy: ProxyProcess, model: DayModel, tools: DayTools, runs: list[PlannedRun]
) -> None:
    refused = f"https://localhost:{free_port()}"  # nothing listens: the tool is down
    for run in runs:
        base = refused if run.scenario == "upstream" else tools.base_url
        order_agent(model.base_url, base, run)


def triage(data_dir: Path, *args: str) -> list[dict[str, Any]]:
    done = freezeframe(data_dir, "triage", "--json", *args)
    assert done.returncode == 0, done.stderr
    groups: list[dict[str, Any]] = json.loads(done.stdout)["groups"]
    return groups


def scores(
    groups: list[dict[str, Any]], runs: list[PlannedRun], cassette: str
) -> tuple[float, float]:
    """Precision and recall over (run, kind) pairs: what triage said against what was planted."""
    planted = {
        (f"{cassette}@{run.run_id}", PLANTED[run.scenario])
        for run in runs
        if run.scenario != "healthy"
    }
    found = {(name, group["kind"]) for group in groups for name in group["runs"]}
    hits = len(planted & found)
    return hits / len(found), hits / len(planted)


def assert_one_group_per_planted_scenario(
    groups: list[dict[str, Any]], runs: list[PlannedRun], cassette: str
) -> None:
    by_scenario: dict[str, set[str]] = {}
    for run in runs:
        by_scenario.setdefault(run.scenario, set()).add(f"{cassette}@{run.run_id}")
    healthy = by_scenario.pop("healthy")
    assert len(groups) == len(PLANTED), [g["signature"] for g in groups]
    for scenario, planted_runs in by_scenario.items():
        matching = [g for g in groups if set(g["runs"]) == planted_runs]
        assert len(matching) == 1, (scenario, [(g["signature"], g["runs"]) for g in groups])
        assert matching[0]["kind"] == PLANTED[scenario], (scenario, matching[0]["signature"])
    for group in groups:
        assert not healthy & set(group["runs"]), group["signature"]
        example = group["example"]
        assert example["cassette"] == cassette and isinstance(example["seq"], int)
        assert group["first_seen"] <= group["last_seen"]


def test_a_planted_day_comes_out_as_one_group_per_failure(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    model: DayModel,
    tools: DayTools,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    runs = plan(SEED)
    proxy = start_proxy(mode="record", cassette="prod-day")
    client_env(proxy)
    record_day(proxy, model, tools, runs)
    assert proxy.stop() == 0

    groups = triage(data_dir)
    assert_one_group_per_planted_scenario(groups, runs, "prod-day")
    precision, recall = scores(groups, runs, "prod-day")
    print(f"recorded day: {len(runs)} runs, precision {precision:.2f}, recall {recall:.2f}")
    assert (precision, recall) == (1.0, 1.0)
    signatures = {g["kind"]: g["signature"] for g in groups}
    # One signature for every 429, whatever the tokens used and the seconds to wait.
    assert signatures["provider_error"].startswith(
        "provider_error POST localhost/v1/chat/completions 429 tokens/rate_limit_exceeded: "
        "Rate limit reached for gpt-4o in organization {id} on tokens per min (TPM): "
        "Limit {n}, Used {n}, Requested {n}. Please try again in {n}s."
    )
    assert signatures["tool_error"] == (
        "tool_error GET localhost/orders/{id} 404: order {n} not found"
    )
    assert signatures["ignored_tool_error"] == (
        "ignored_tool_error GET localhost/shipping/{id} 500: "
        "shipping database unavailable (shard {n})"
    )
    assert signatures["schema"] == "schema lookup_order $.order_id: type (integer)"
    assert signatures["truncation"] == (
        "truncation POST localhost/v1/chat/completions: finish_reason length"
    )

    only = triage(data_dir, "--kind", "loop")
    assert [g["kind"] for g in only] == ["loop"]
    assert triage(data_dir, "--cassette", "other-*") == []
    assert triage(data_dir, "--since", "1h") == groups
    bad = freezeframe(data_dir, "triage", "--since", "5x")
    assert (bad.returncode, bad.stderr.strip()) == (
        1,
        "freezeframe: error: --since '5x': not a duration; write a number and a unit, "
        "e.g. 30m, 6h, 2d",
    )

    # The same day as a HAR file, imported: the same groups under the new name.
    har = tmp_path / "day.har"
    exported = freezeframe(data_dir, "export", "prod-day", "-o", str(har), "--format", "har")
    assert exported.returncode == 0, exported.stderr
    imported = freezeframe(data_dir, "import", str(har), "--as", "day-har")
    assert imported.returncode == 0, imported.stderr
    from_har = triage(data_dir, "--cassette", "day-har")
    assert_one_group_per_planted_scenario(from_har, runs, "day-har")
    precision, recall = scores(from_har, runs, "day-har")
    print(f"imported HAR: {len(runs)} runs, precision {precision:.2f}, recall {recall:.2f}")
    assert (precision, recall) == (1.0, 1.0)
    assert {g["signature"] for g in from_har} == {g["signature"] for g in groups}
