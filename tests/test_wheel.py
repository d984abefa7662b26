"""The wheel, installed as a user installs it: into a fresh venv outside the repository, used
from an agent's project that has its own ``cli.py``, ``storage.py`` and ``proxy/`` package.

Before the one import name, the wheel put ``cli``, ``proxy`` and ``storage`` at the top of
site-packages: in such a project the plugin's proxy ran the project's own ``cli.py``, and a
``storage.py`` broke ``from storage import BlobRef``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[1]
#: What the wheel may hold at its top: the package and pytest's plugin module, nothing else.
TOP_LEVEL = {"freezeframe", "pytest_freezeframe.py"}

#: An agent's project whose module names are the ones freezeframe's packages had.
SHADOWS = {
    "cli.py": "raise SystemExit('the project cli.py ran, not freezeframe')\n",
    "storage.py": "raise ImportError('the project storage.py was imported')\n",
    "proxy/__init__.py": "raise ImportError('the project proxy package was imported')\n",
    "addons.py": "raise ImportError('the project addons.py was imported')\n",
}

AGENT_TESTS = """
import os

import openai

client = openai.OpenAI(
    base_url=os.environ["UPSTREAM_URL"] + "/v1", api_key="sk-test-wheel", max_retries=0
)


def test_agent(freezeframe):
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content
    assert [e.kind for e in freezeframe.events] == [os.environ["EXPECTED_KIND"]]
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    [built] = out.glob("freezeframe-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel and what a user's tests need (pytest, an SDK)."""
    path = tmp_path_factory.mktemp("user-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    subprocess.run(
        [path / "bin" / "python", "-m", "pip", "install", "--quiet", str(wheel)]
        + ["pytest", "openai"],
        check=True,
        timeout=600,
        capture_output=True,
    )
    yield path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An agent's project directory, outside the repository, full of colliding names."""
    root = tmp_path / "agent-project"
    for name, text in SHADOWS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def user_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell with the venv active: no PYTHONPATH, nothing of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FREEZEFRAME_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return {**env, **extra}


def test_the_wheel_holds_one_import_name_and_what_running_needs(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == TOP_LEVEL
    for needed in (
        "freezeframe/__main__.py",
        "freezeframe/cli.py",
        "freezeframe/commands/read.py",
        "freezeframe/proxy/admin/templates/base.html",
        "freezeframe/proxy/admin/static/htmx-LICENSE.txt",
        "freezeframe/exchange_formats/schema/jsonl.schema.json",
        "freezeframe/storage/sql/store.py",
        "freezeframe/providers/model_prices.json",
    ):
        assert needed in names, needed
    assert not [name for name in names if name.startswith("tests/") or "/tests/" in name]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "freezeframe = freezeframe.cli:main" in text
    assert "freezeframe = pytest_freezeframe" in text


def test_installed_commands_ignore_a_project_with_colliding_modules(
    venv: Path, project: Path, tmp_path: Path
) -> None:
    env = user_env(venv)
    version = subprocess.run(
        ["freezeframe", "--version"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    meta = subprocess.run(
        [
            venv / "bin" / "python",
            "-c",
            "import importlib.metadata as m; print(m.version('freezeframe'))",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.strip() == f"freezeframe, version {meta.stdout.strip()}"
    as_module = subprocess.run(
        [venv / "bin" / "python", "-m", "freezeframe", "--version"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert as_module.returncode == 0, as_module.stderr
    assert as_module.stdout == version.stdout

    data_dir = tmp_path / "store"
    ports = [str(_free_port()), str(_free_port())]
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        proxy = subprocess.Popen(
            ["freezeframe", "run", "--data-dir", str(data_dir)]
            + ["--listen", f"127.0.0.1:{ports[0]}", "--admin", f"127.0.0.1:{ports[1]}"],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        health = _wait_health(f"http://127.0.0.1:{ports[1]}/health", proxy, log)
        assert health["mode"] == "record"
    finally:
        proxy.terminate()
        proxy.wait(30)

    listed = subprocess.run(
        ["freezeframe", "ls", "--data-dir", str(data_dir)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "project" not in listed.stdout + listed.stderr


def test_the_plugin_records_and_replays_an_import_time_client_in_such_a_project(
    venv: Path, project: Path, upstream: Upstream, upstream_ca_file: Path, tmp_path: Path
) -> None:
    (project / "test_agent.py").write_text(textwrap.dedent(AGENT_TESTS))
    data_dir = tmp_path / "ff"

    def pytest_run(*args: str, kind: str) -> subprocess.CompletedProcess[str]:
        env = user_env(
            venv,
            UPSTREAM_URL=upstream.base_url,
            FREEZEFRAME_UPSTREAM_CA=str(upstream_ca_file),
            FREEZEFRAME_REPLAY_PACE="instant",
            EXPECTED_KIND=kind,
        )
        return subprocess.run(
            [venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", "-q"]
            + [f"--freezeframe-data-dir={data_dir}", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    recorded = pytest_run("--freezeframe-mode=record", kind="recorded")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "1 passed" in recorded.stdout
    upstream.reset_counters()

    replayed = pytest_run("--freezeframe-mode=replay", kind="hit")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert upstream.connections == 0


def _free_port() -> int:
    from freezeframe.proxy.ports import unused_port

    return unused_port()


def _wait_health(url: str, process: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = log.read_text(errors="replace")
            raise AssertionError(f"freezeframe run exited {process.returncode}: {out}")
        try:
            answer: dict[str, object] = httpx.get(url, timeout=2).json()
            return answer
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"no answer from {url} in 60 s")
