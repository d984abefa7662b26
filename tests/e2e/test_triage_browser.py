"""The triage page and the marks it leaves on the steps page, in a real browser, on runs
recorded by the real proxy: groups with their runs, one click to the failing exchange, a
schema violation shown with the rule it broke, a loop and dropped context marked on the
steps they span, and a case note; recorded text stays text."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import artifact_path, chromium_or_skip, failed
from support.proxy import ProxyProcess
from support.triage_world import DayModel, DayTools, PlannedRun, order_agent

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
HOSTILE = 9099
"""The order whose 404 says something a page must show as text."""


class HostileTools(DayTools):
    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        if target == f"/orders/{HOSTILE}":
            return 404, {"error": "<img src=x onerror=alert(1)> not found"}
        return super().answer(method, target, body)


@pytest.fixture
def recorded(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    upstream_ca: trustme.CA,
    data_dir: Path,
) -> Iterator[ProxyProcess]:
    model, tools = DayModel(upstream_ca, 3).start(), HostileTools(upstream_ca).start()
    try:
        proxy = start_proxy(mode="record", cassette="triage-day")
        client_env(proxy)
        for run in (
            PlannedRun("ok-1", "healthy", 12_345),
            PlannedRun("loop-1", "loop", 10_000),  # asks 3 + 10000 % 3 = 4 times
            PlannedRun("schema-1", "schema", 20_001),
            PlannedRun("schema-2", "schema", 20_002),
            PlannedRun("dropped-1", "dropped", 30_003),
            PlannedRun("hostile-1", "tool_404", HOSTILE),
        ):
            order_agent(model.base_url, tools.base_url, run)
        proxy.stored("triage-day", 18)
        noted = subprocess.run(
            [sys.executable, "-P", "-m", "freezeframe", "note", "triage-day:0"]
            + ["TICKET-24: schema drift since Tuesday", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert noted.returncode == 0, noted.stderr
        yield proxy
    finally:
        model.stop()
        tools.stop()


@pytest.fixture
def page(recorded: ProxyProcess, request: pytest.FixtureRequest) -> Iterator[Page]:
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-proxy-server"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        yield page
        if failed(request.node):
            page.screenshot(path=str(artifact_path(request.node)), full_page=True)
        assert dialogs == [], "recorded text ran as script"
        browser.close()


def test_triage_groups_lead_to_the_failing_exchange_and_mark_the_steps(
    recorded: ProxyProcess, page: Page
) -> None:
    twin = recorded.admin("GET", "/triage.json").json()
    kinds = {g["kind"]: g for g in twin["groups"]}
    assert set(kinds) == {"loop", "schema", "context", "tool_error"}, twin
    assert kinds["schema"]["runs"] == ["triage-day@schema-1", "triage-day@schema-2"]

    page.goto(f"{recorded.admin_url}/triage")
    groups = page.locator("li.group")
    expect(groups).to_have_count(len(twin["groups"]))
    hostile = page.locator("li.group[data-kind=tool_error] code.signature")
    expect(hostile).to_contain_text("<img src=x onerror=alert({n})> not found")
    expect(page.locator("li.group img")).to_have_count(0)
    schema = page.locator("li.group[data-kind=schema]")
    expect(schema.locator(".count")).to_have_text("2")
    expect(schema.locator("svg.bars rect")).not_to_have_count(0)

    # One click from the group to the failing exchange.
    example = kinds["tool_error"]["example"]
    page.locator("li.group[data-kind=tool_error] a.example-link").click()
    expect(page).to_have_url(f"{recorded.admin_url}/cassettes/triage-day/{example['seq']}")
    expect(page.locator("body")).to_contain_text("404")

    # The steps page: the violation inline with its rule, the loop and the dropped system
    # prompt marked on every step they span, the note shown.
    page.goto(f"{recorded.admin_url}/cassettes/triage-day/steps")
    violations = page.locator(".violation")
    expect(violations).to_have_count(2)
    expect(violations.first.locator("b.rule")).to_have_text("type")
    expect(violations.first).to_contain_text("$.order_id")
    loop_steps = page.locator("li.step.marked-loop")
    expect(loop_steps).to_have_count(4)
    expect(loop_steps.first.locator(".mark-loop")).to_contain_text("step 1 of 4")
    expect(page.locator("li.step.marked-context")).to_have_count(2)
    expect(page.locator("p.case-note")).to_contain_text("TICKET-24: schema drift since Tuesday")
    steps = recorded.admin("GET", "/cassettes/triage-day/steps.json").json()
    assert [v["rule"] for vs in steps["triage"]["violations"].values() for v in vs] == [
        "type",
        "type",
    ]
    assert json.dumps(steps["notes"]).count("TICKET-24") == 1
