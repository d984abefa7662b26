"""Case notes on a run recorded by the real proxy: written with ``note``, shown by ``show``,
found by ``search``, and carried by a jsonl export and a signed bundle into the cassette
they are imported as."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme
from support.proxy import ProxyProcess
from support.triage_world import DayModel, DayTools, PlannedRun, order_agent

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]


def freezeframe(data_dir: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    where = [] if data_dir is None else ["--data-dir", str(data_dir)]
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, *where],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_notes_are_shown_found_and_carried_by_export_and_import(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    upstream_ca: trustme.CA,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    model, tools = DayModel(upstream_ca, 5).start(), DayTools(upstream_ca).start()
    try:
        proxy = start_proxy(mode="record", cassette="ticket-412")
        client_env(proxy)
        order_agent(model.base_url, tools.base_url, PlannedRun("r-1", "healthy", 55_555))
        assert proxy.stop() == 0
    finally:
        model.stop()
        tools.stop()

    ok(freezeframe(data_dir, "note", "ticket-412", "TICKET-412: customer saw a refund twice"))
    said = ok(
        freezeframe(data_dir, "note", "ticket-412:1", "cold case: missing tool schema version")
    )
    assert said.strip() == "noted on ticket-412 exchange 1"
    missing = freezeframe(data_dir, "note", "ticket-412:99", "nothing there")
    assert missing.returncode != 0
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert "99" in missing.stderr and "ticket-412" in missing.stderr
    unknown = freezeframe(data_dir, "note", "nope", "x")
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
    assert "'nope'" in unknown.stderr

    shown = ok(freezeframe(data_dir, "show", "ticket-412"))
    assert "TICKET-412: customer saw a refund twice" in shown
    assert "#1  cold case: missing tool schema version" in shown
    one = json.loads(ok(freezeframe(data_dir, "show", "ticket-412", "1", "--json")))
    assert [n["text"] for n in one["notes"]] == ["cold case: missing tool schema version"]

    hits = json.loads(ok(freezeframe(data_dir, "search", "tool schema", "--json")))
    assert [(h["cassette"], h["seq"], h["parts"]) for h in hits] == [("ticket-412", 1, ["note"])]
    assert "note on ticket-412 #1" in ok(freezeframe(data_dir, "search", "cold case"))

    jsonl = tmp_path / "case.jsonl"
    ok(freezeframe(data_dir, "export", "ticket-412", "-o", str(jsonl)))
    ok(freezeframe(data_dir, "import", str(jsonl), "--as", "ticket-412-review"))
    ok(freezeframe(None, "keygen", "-o", str(tmp_path / "team")))
    bundle = tmp_path / "case.ffcase"
    exported = freezeframe(
        data_dir, "export", "ticket-412", "-o", str(bundle), "--format", "bundle",
        "--sign", str(tmp_path / "team.key"),
    )  # fmt: skip
    ok(exported)
    trust = str(tmp_path / "team.pub")
    ok(freezeframe(None, "verify", "--bundle", str(bundle), "--trust", trust))
    ok(freezeframe(data_dir, "import", str(bundle), "--as", "ticket-412-bundle"))
    for copy in ("ticket-412-review", "ticket-412-bundle"):
        shown = ok(freezeframe(data_dir, "show", copy))
        assert "TICKET-412: customer saw a refund twice" in shown, copy
        assert "#1  cold case: missing tool schema version" in shown, copy
