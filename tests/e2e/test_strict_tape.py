"""``exec --strict``: a replay that leaves a recorded call unasked, or asks out of recorded
order, fails and names the call; without strict, out-of-order answers are still reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
AGENT = textwrap.dedent(
    """
    import sys, httpx
    url, steps = sys.argv[1], sys.argv[2].split(",")
    calls = {"look": ("GET", "/tool/counter"), "delete": ("DELETE", "/tool/records/7")}
    with httpx.Client(timeout=10) as http:
        for step in steps:
            method, path = calls[step]
            assert http.request(method, url + path).status_code < 500
    """
)


def test_strict_fails_on_an_unused_call_and_names_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    upstream_ca_file: Path,
    data_dir: Path,
) -> None:
    def exec_(
        mode: str, steps: str, *args: str, strict_variable: str = ""
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
        env["FREEZEFRAME_STRICT"] = strict_variable
        return subprocess.run(
            [
                sys.executable, "-P", "-m", "freezeframe", "exec",
                "--data-dir", str(data_dir),
                "--mode", mode,
                "--cassette", "tape",
                "--upstream-ca", str(upstream_ca_file),
                "--listen", f"127.0.0.1:{free_port()}",
                "--admin", f"127.0.0.1:{free_port()}",
                "--replay-pace", "instant",
                *args,
                "--", sys.executable, "-c", AGENT, upstream.base_url, steps,
            ],
            capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
        )  # fmt: skip

    assert exec_("record", "look,delete").returncode == 0
    upstream.reset_counters()

    whole = exec_("replay", "look,delete", "--strict")
    assert whole.returncode == 0, whole.stderr
    assert "never asked for" not in whole.stderr

    # The fix that silently skips the delete passes a plain replay, and fails a strict one.
    skipped = exec_("replay", "look")
    assert skipped.returncode == 0, skipped.stderr
    strict = exec_("replay", "look", "--strict")
    assert strict.returncode == 1
    lines = strict.stderr.splitlines()
    assert (
        f"freezeframe: tape: recorded but never asked for: #1 DELETE {upstream.base_url}"
        "/tool/records/7"
    ) in lines
    assert lines[-1] == "freezeframe: error: --strict: the run left the tape as listed above"

    # The store keeps what the last replay left: `show --unused`.
    shown = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "show", "tape", "--unused", "--json",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    kept = json.loads(shown.stdout)
    assert [(r["seq"], r["method"]) for r in kept["unused"]] == [(1, "DELETE")]
    assert kept["out_of_order"] == []
    casefile = start_proxy(mode="replay", cassette="tape")
    page = casefile.admin("GET", "/cassettes/tape").text
    assert "left 1 recorded exchange unasked" in page
    assert 'never asked for: <a href="/cassettes/tape/1">#1</a> DELETE' in page
    assert casefile.stop() == 0

    # Out of recorded order: reported always, a failure under strict (here by variable).
    swapped = exec_("replay", "delete,look")
    assert swapped.returncode == 0
    said = f"freezeframe: tape: answered out of recorded order: #0 GET {upstream.base_url}"
    assert f"{said}/tool/counter (after #1)" in swapped.stderr.splitlines()
    failed = exec_("replay", "delete,look", strict_variable="1")
    assert failed.returncode == 1
    assert upstream.connections == 0
