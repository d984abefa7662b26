"""``freezeframe demo``: record an agent, then replay it with its model and tool stopped.

Everything runs on this machine: the world of ``proxy.demo_world`` (a model, a tool), and
two ``freezeframe run`` processes started the way a user starts them, one recording into the
cassette ``demo`` and then one replaying it. The agent's two runs are compared line for line;
the cassette stays, so ``freezeframe ls``, ``show demo`` and the case file have something to
show afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from freezeframe.proxy.discovery import NoProxyFound, running
from freezeframe.proxy.ports import unused_port
from freezeframe.proxy.settings import CA_FILENAME, DEFAULT_ADMIN, Address

if TYPE_CHECKING:
    from freezeframe.proxy.demo_world import World

CASSETTE = "demo"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class DemoFailed(Exception):
    """A step of the demo did not work; the message is one line saying which and why."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """A ``freezeframe run`` the demo started: its proxy URL and its case file's address."""

    url: str
    admin: str
    process: subprocess.Popen[bytes]


@dataclass(frozen=True, slots=True)
class Outcome:
    recorded: list[str]
    replayed: list[str]
    model_url: str
    tool_url: str

    @property
    def identical(self) -> bool:
        return self.recorded == self.replayed


def run_demo(
    data_dir: Path,
    store: str | None,
    say: Callable[[str], None],
    then: Callable[[Proxy, Outcome], None],
) -> Outcome:
    """Record the agent into ``demo``, stop the model and the tool, replay it; ``then`` is
    given the replaying proxy and the outcome before that proxy stops (to show the case
    file while it serves it)."""
    from freezeframe.proxy.demo_world import run_agent, world

    with tempfile.TemporaryDirectory(prefix="freezeframe-demo-") as scratch:
        where = Path(scratch)
        with world(where) as w:
            say(f"a model at {w.model_url} (streamed chat completions, a tool call; HTTPS)")
            say(f"a tool at {w.tool_url}")
            with _proxy("record", data_dir, store, w.model_ca, where) as recorder:
                say(f"record: freezeframe run --mode record --cassette {CASSETTE} ({recorder.url})")
                recorded = _agent("record", run_agent, w, recorder, data_dir)
            for line in recorded:
                say(f"  {line}")
        say("the model and the tool are stopped")
        admin = os.environ.get("FREEZEFRAME_ADMIN") or DEFAULT_ADMIN  # the case file's usual
        with _proxy("replay", data_dir, store, w.model_ca, where, admin) as replayer:
            say(f"replay: freezeframe run --mode replay --cassette {CASSETTE} ({replayer.url})")
            replayed = _agent("replay", run_agent, w, replayer, data_dir)
            for line in replayed:
                say(f"  {line}")
            outcome = Outcome(recorded, replayed, w.model_url, w.tool_url)
            then(replayer, outcome)
    return outcome


def _agent(
    mode: str, run_agent: Callable[..., list[str]], w: World, proxy: Proxy, data_dir: Path
) -> list[str]:
    """One run of the agent; a failure is one line naming the phase."""
    import httpx

    try:
        return run_agent(w, proxy.url, data_dir / CA_FILENAME)
    except (httpx.HTTPError, RuntimeError, LookupError, ValueError) as exc:
        raise DemoFailed(f"the agent failed in {mode}: {exc}") from exc


@contextlib.contextmanager
def _proxy(
    mode: str,
    data_dir: Path,
    store: str | None,
    upstream_ca: Path,
    scratch: Path,
    admin: str | None = None,
) -> Iterator[Proxy]:
    """``freezeframe run`` in ``mode`` on free ports (the admin on ``admin`` when that is
    free: the case file's usual address), until /health answers; stopped on exit."""
    listen = f"127.0.0.1:{unused_port()}"
    wanted = Address.parse(admin, "admin address") if admin else None
    if wanted is None or not _is_free(wanted):
        wanted = Address("127.0.0.1", unused_port())
    command = [
        sys.executable, "-P", "-m", "freezeframe", "run", "--mode", mode,
        "--cassette", CASSETTE, "--data-dir", str(data_dir), "--listen", listen,
        "--admin", str(wanted), "--upstream-ca", str(upstream_ca), "--replay-pace", "instant",
    ]  # fmt: skip
    if store:
        command += ["--store", store]
    if mode == "record":
        command.append("--fresh")  # a second demo records the cassette again, not after it
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    log = scratch / f"{mode}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for(process, wanted, log)
        yield Proxy(f"http://{listen}", f"http://{wanted}", process)
    finally:
        _stop(process)


def _wait_for(process: subprocess.Popen[bytes], admin: Address, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = log.read_text(errors="replace").strip().splitlines()
            raise DemoFailed(f"the proxy did not start: {said[-1] if said else process.returncode}")
        with contextlib.suppress(NoProxyFound):
            running(admin)
            return
        time.sleep(0.1)
    raise DemoFailed(f"the proxy did not answer at {admin} within {START_TIMEOUT_S:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as Ctrl-C would: the proxy writes what it holds and closes the store."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)


def _is_free(address: Address) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((address.host, address.port))
        except OSError:
            return False
    return True


def can_open_browser() -> bool:
    """Whether a browser can be shown here: a display (or macOS, or Windows) and a browser
    that Python's webbrowser module finds."""
    import webbrowser

    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not display and sys.platform not in ("darwin", "win32"):
        return False
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def present(
    replayer: Proxy, outcome: Outcome, store_url: str, browser: bool, echo: Callable[[str], None]
) -> None:
    """The demo's end: whether replay was identical, where the cassette is, and its case
    file, served until Ctrl-C on a terminal (in a browser when ``browser`` and there is
    one to open)."""
    verdict = "yes" if outcome.identical else "NO"
    echo(f"replay was identical: {verdict} (the model and the tool were stopped)")
    echo(f"cassette {CASSETTE!r} is in {store_url}")
    echo(f"  freezeframe ls; freezeframe show {CASSETTE}")
    url = f"{replayer.admin}/cassettes/{CASSETTE}"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        echo(f"case file: {url}")
        echo(f"  (served by: freezeframe run --mode replay --cassette {CASSETTE})")
        return
    echo(f"case file: {url} (served until Ctrl-C)")
    if browser and can_open_browser():
        import webbrowser

        webbrowser.open(url)
    with contextlib.suppress(KeyboardInterrupt):
        replayer.process.wait()
