"""The command line answers at once: reading a store never imports the proxy engine.

Each command runs in a fresh interpreter, as a user's shell starts it, and reports which of
the heavy libraries it had imported when it finished. mitmproxy (and the HTTP client, the
web stack and the proxy's own modules) cost about a second of CPU to import; a reader that
pulls them in makes `freezeframe ls` feel like starting a server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import invoke, record

from freezeframe.commands import running, start, triage
from freezeframe.evidence import signatures
from freezeframe.sandbox import command, wiring

HEAVY = (
    "mitmproxy",
    "aioquic",
    "OpenSSL",
    "httpx",
    "starlette",
    "uvicorn",
    "jinja2",
    "freezeframe.proxy.serve",
    "freezeframe.proxy.master",
    "freezeframe.addons.record",
    "freezeframe.addons.replay",
)

REPORT = """
import atexit, json, runpy, sys
heavy = {heavy!r}
def report():
    loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
    with open({out!r}, "w") as out:
        json.dump(loaded, out)
atexit.register(report)
sys.argv = ["freezeframe", *{args!r}]
runpy.run_module("freezeframe", run_name="__main__", alter_sys=True)
"""


def loaded_by(
    args: list[str], tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``freezeframe ARGS`` in a fresh interpreter; its result and the heavy modules it
    had imported by the time it exited."""
    out = tmp_path / "modules.json"
    script = REPORT.format(heavy=HEAVY, out=str(out), args=args)
    done = subprocess.run(
        [sys.executable, "-P", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("fast") / "data"
    record(data_dir, "orders", 3)
    record(data_dir, "other", 1, status=429)
    return data_dir


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["ls"],
        ["ls", "--json"],
        ["show", "orders"],
        ["show", "orders", "1"],
        ["show", "orders", "1", "--json"],
        ["verify", "orders"],
        ["search", "chatcmpl-1"],
        ["diff", "orders", "other"],
        ["export", "orders", "-o", "orders.jsonl"],
        ["export", "orders", "-o", "orders.har", "--format", "har"],
    ],
    ids=" ".join,
)
def test_readers_never_import_the_proxy_engine(
    store: Path, tmp_path: Path, args: list[str]
) -> None:
    given = args if args == ["--help"] else [*args, "--data-dir", str(store)]
    done, heavy = loaded_by(given, tmp_path)
    assert done.returncode in (0, 1), done.stderr  # diff exits 1: the runs differ
    assert "Traceback" not in done.stderr and done.stdout
    assert heavy == []


def test_import_of_an_export_never_imports_the_proxy_engine(store: Path, tmp_path: Path) -> None:
    exported = tmp_path / "orders.jsonl"
    assert invoke("export", "orders", "-o", str(exported), "--data-dir", str(store)).exit_code == 0
    done, heavy = loaded_by(
        ["import", str(exported), "--as", "again", "--data-dir", str(tmp_path / "data")], tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "again: imported 3 exchanges" in done.stdout
    assert heavy == []


def test_the_choices_the_cli_offers_are_the_ones_the_proxy_knows() -> None:
    # Copied into the command modules so that --help need not import the sandbox, the CA
    # tools and jsonschema.
    assert start.CAPTURES == command.CAPTURES
    assert running.SHELLS == wiring.SHELLS
    assert triage.FAILURE_KINDS == signatures.KINDS
