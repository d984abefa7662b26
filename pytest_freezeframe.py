"""The pytest plugin: a test's HTTP(S) traffic goes through freezeframe, replayed by default.

A reproduced failure becomes a regression test by naming its cassette:
``@pytest.mark.freezeframe(cassette="bug-8821")``, or the ``freezeframe`` fixture (the
cassette is then named after the test). The test's process and its subprocesses get
``HTTPS_PROXY``, ``SSL_CERT_FILE`` and the rest of ``exec``'s variables, restored afterwards.
``--freezeframe-mode`` defaults to ``replay``, so CI never calls a provider, and a replay miss
fails the test with the miss's explanation.

One ``freezeframe run`` process per pytest process (per xdist worker), per rules file,
started when the first test asks for it: starting one costs a second or two, switching its
mode and cassette between tests (``PUT /api/mode``, which also starts replay from the top)
costs a request. Mode and cassette are the proxy's, not a request's, so two tests running at
once cannot share one; each xdist worker runs its tests one at a time with its own.

Most agents build their client when their module is imported (``client = OpenAI()`` at
module level), and such a client reads ``HTTPS_PROXY`` and its trust store then, before any
fixture runs. A project that says it uses freezeframe (``freezeframe_mode`` in its pytest
configuration, or ``--freezeframe-mode`` on the command line) gets the session's proxy at
``pytest_configure``, before test modules are imported, with the environment set for the
whole session; between freezeframe tests that proxy passes traffic through untouched. A
freezeframe test whose traffic never reached the proxy is named, with the likely cause.

Importing this module starts nothing and imports nothing heavy: pytest loads it in every
session of an environment where freezeframe is installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from freezeframe.proxy.ports import unused_port

if TYPE_CHECKING:
    from freezeframe.addons.state import Event
    from freezeframe.evidence.tape import Tape

MODES = ("record", "replay", "auto", "passthrough")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
#: How long the fixture waits for a recorded exchange to reach the store when asked for it.
STORED_TIMEOUT = 10.0
#: Settings the plugin gives every proxy itself; an inherited variable must not contradict it.
#: Its proxies' admin ports are on loopback, for the session alone, and the plugin talks to them
#: without a token: one exported for another proxy (``FREEZEFRAME_ADMIN_TOKEN``) is not theirs.
OWN_SETTINGS = (
    "FREEZEFRAME_FRESH",
    "FREEZEFRAME_REPLAY_SESSION",
    "FREEZEFRAME_CASSETTE",
    "FREEZEFRAME_ADMIN_TOKEN",
    "FREEZEFRAME_ADMIN_HOSTS",
)
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._:@+=-]+")
_SESSION = pytest.StashKey["Session"]()
_USE = pytest.StashKey["Freezeframe"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("freezeframe", "record and replay HTTP(S) with freezeframe")
    group.addoption(
        "--freezeframe-mode",
        choices=MODES,
        default=None,
        help="Mode of tests that use freezeframe (a marker's mode= wins). Default: the "
        "freezeframe_mode ini setting, else replay. Given here or there, the proxy starts "
        "before test modules are imported, so clients built at import time use it.",
    )
    group.addoption(
        "--freezeframe-data-dir",
        default=None,
        metavar="DIR",
        help="freezeframe's data dir. Default: FREEZEFRAME_DATA_DIR, else <rootdir>/.freezeframe. "
        "Given here, like a mode, the proxy starts before test modules are imported.",
    )
    parser.addini(
        "freezeframe_mode",
        "Mode of tests that use freezeframe (replay, record, auto, passthrough). Setting it "
        "says the project uses freezeframe: the proxy and its environment are in place before "
        "test modules are imported.",
        default=None,
    )
    parser.addini(
        "freezeframe_strict",
        "In replay, fail a test that left a recorded exchange unasked for, or was answered "
        "out of recorded order (a marker's strict= wins; FREEZEFRAME_STRICT=1 too).",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "freezeframe(cassette=None, mode=None, rules=None, strict=None): run the test's "
        "HTTP(S) traffic through freezeframe, replaying (or recording) the cassette; with "
        "strict, every recorded exchange must be asked for, in order",
    )
    session = Session(config)
    config.stash[_SESSION] = session
    if session.wide and not _is_xdist_controller(config):
        session.start_wide()


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.stop()


def default_mode(config: pytest.Config) -> str:
    """The mode of a test without ``mode=``: the flag, else the ini setting, else replay."""
    mode = config.getoption("freezeframe_mode") or config.getini("freezeframe_mode") or "replay"
    if mode not in MODES:
        raise pytest.UsageError(f"freezeframe_mode = {mode!r}: choose one of {MODES}")
    return str(mode)


def _is_xdist_controller(config: pytest.Config) -> bool:
    """Under ``-n``, the controller runs no test: its workers start their own proxies."""
    if hasattr(config, "workerinput"):
        return False
    return bool(getattr(config.option, "numprocesses", None)) or (
        getattr(config.option, "dist", "no") != "no"
    )


@dataclass(frozen=True, slots=True)
class Drifted:
    """A test whose replayed requests differed from the recordings in stripped parts."""

    nodeid: str
    events: tuple[Event, ...]


@dataclass
class Session:
    """The proxies of this pytest process, started on first use, and what they saw."""

    config: pytest.Config
    proxies: dict[str | None, Proxy] = field(default_factory=dict)
    drifted: list[Drifted] = field(default_factory=list)
    #: Freezeframe tests whose proxy saw none of their traffic.
    unseen: list[str] = field(default_factory=list)
    #: The variables the session-wide environment replaced, to put back at the end.
    _before: dict[str, str | None] | None = None

    @property
    def wide(self) -> bool:
        """Whether the project says it uses freezeframe, so the session gets its proxy and
        environment before test modules are imported: a mode (flag or ini), or a data dir
        given on the command line, which says it as clearly."""
        config = self.config
        return bool(
            config.getoption("freezeframe_mode")
            or config.getini("freezeframe_mode")
            or config.getoption("freezeframe_data_dir")
        )

    def start_wide(self) -> None:
        """Start the session's proxy, passing traffic through until a freezeframe test
        switches it, and point this process (and so every client it builds) at it."""
        proxy = self.proxy(None, "passthrough")
        wanted = proxy.client_environment()
        self._before = {name: os.environ.get(name) for name in wanted}
        _apply(wanted)

    @property
    def data_dir(self) -> Path:
        given = self.config.getoption("freezeframe_data_dir") or os.environ.get(
            "FREEZEFRAME_DATA_DIR"
        )
        if given:
            return Path(given).expanduser().absolute()
        return self.config.rootpath / ".freezeframe"

    def proxy(self, rules: str | None, mode: str = "replay") -> Proxy:
        if rules not in self.proxies:
            self.proxies[rules] = Proxy.start(self.data_dir, rules, mode)
        return self.proxies[rules]

    def stop(self) -> None:
        if self._before is not None:
            _apply(self._before)
            self._before = None
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()


class Freezeframe:
    """The ``freezeframe`` fixture: where the test's traffic goes, and what happened to it.

    ``events`` are this test's requests as the proxy handled them (``hit``, ``miss``,
    ``recorded``), read when asked, so a test can assert on them as it goes.
    """

    def __init__(self, proxy: Proxy, cassette: str, mode: str, strict: bool = False) -> None:
        self.proxy_url = proxy.url
        self.admin_url = proxy.admin_url
        self.cassette = cassette
        self.mode = mode
        self.strict = strict
        self._proxy = proxy
        self._after = proxy.journal_last()

    @property
    def events(self) -> list[Event]:
        from freezeframe.addons.state import Event

        answer = self._proxy.get(f"/api/events?after={self._after}")
        return [
            Event(
                **{
                    **document,
                    "drift": tuple(document["drift"]),
                    "drift_values": tuple(
                        (value["path"], value["recorded"], value["live"])
                        for value in document.get("drift_values", ())
                    ),
                }
            )
            for document in answer["events"]
        ]

    @property
    def hits(self) -> list[Event]:
        return [event for event in self.events if event.kind == "hit"]

    @property
    def misses(self) -> list[Event]:
        return [event for event in self.events if event.kind == "miss"]

    @property
    def drift(self) -> list[Event]:
        """The hits whose request differed from the recording in parts the key leaves out."""
        return [event for event in self.hits if event.drift]

    @property
    def recorded(self) -> list[Event]:
        return [event for event in self.events if event.kind == "recorded"]

    def tape(self) -> Tape:
        """The cassette as this test left it (evidence.tape): what it never asked for, and
        what it was answered out of recorded order."""
        from freezeframe.evidence.tape import Recorded, read_tape

        listed = self._proxy.get(f"/api/cassettes/{self.cassette}")
        recorded = [Recorded(row["seq"], row["method"], row["url"]) for row in listed]
        served = [e.seq for e in self.hits if e.cassette == self.cassette and e.seq is not None]
        return read_tape(self.cassette, recorded, served)

    @property
    def exchanges(self) -> list[dict[str, Any]]:
        """The exchanges this test was served or recorded, whole (``show CASSETTE SEQ
        --json``), in the order the requests came."""
        return [
            self._proxy.exchange(event.cassette, event.seq)
            for event in self.events
            if event.seq is not None
        ]


@pytest.fixture
def freezeframe(request: pytest.FixtureRequest) -> Iterator[Freezeframe]:
    """This test's traffic through freezeframe: the marker's cassette, mode and rules, else
    a cassette named after the test and ``--freezeframe-mode``."""
    marker = request.node.get_closest_marker("freezeframe")
    wanted: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = set(wanted) - {"cassette", "mode", "rules", "strict"}
    if unknown:
        raise pytest.UsageError(
            "@pytest.mark.freezeframe takes cassette=, mode=, rules= and strict=, "
            f"not {sorted(unknown)}"
        )
    mode = wanted.get("mode") or default_mode(request.config)
    if mode not in MODES:
        raise pytest.UsageError(f"@pytest.mark.freezeframe(mode={mode!r}): choose one of {MODES}")
    cassette = wanted.get("cassette") or cassette_name(request.node.nodeid)
    rules = wanted.get("rules")
    if rules is not None:
        rules = str((request.node.path.parent / rules).absolute())
    session = request.config.stash[_SESSION]
    proxy = session.proxy(rules)
    if mode == "record":
        proxy.empty(cassette)
    proxy.switch(mode, cassette)
    use = Freezeframe(proxy, cassette, mode, _strict(request.config, wanted.get("strict")))
    request.node.stash[_USE] = use
    with _environment(proxy.client_environment()):
        yield use
    if not use.events:
        session.unseen.append(request.node.nodeid)
    if drift := use.drift:
        session.drifted.append(Drifted(request.node.nodeid, tuple(drift)))
    if session.wide and rules is None:
        proxy.switch("passthrough", cassette)


@pytest.fixture(autouse=True)
def _freezeframe_marker(request: pytest.FixtureRequest) -> None:
    """A test with the marker gets the fixture without naming it."""
    if request.node.get_closest_marker("freezeframe") is not None:
        request.getfixturevalue("freezeframe")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """In replay, a test that missed fails, with the misses' explanation as its message;
    a failed test whose traffic never reached the proxy says where it likely went."""
    report = yield
    use = item.stash.get(_USE, None)
    if use is None or report.when != "call":
        return report
    if report.failed and not use.events:
        report.sections.append(("freezeframe", _nothing_reached(item.config)))
    if use.mode != "replay":
        return report
    misses = use.misses
    if misses:
        if report.failed:
            report.sections.append(("the test's own failure", str(report.longrepr)))
        report.outcome = "failed"
        report.longrepr = "\n".join(event.message for event in misses)
        return report
    if not use.strict and not use.hits:
        return report  # nothing was answered, so nothing was answered out of order
    try:
        tape = use.tape()
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        return report  # no such cassette: every request of the test missed
    if lines := tape.lines(use.strict):
        report.sections.append(("freezeframe tape", "\n".join(lines)))
    if tape.failed(use.strict) and not report.failed:
        report.outcome = "failed"
        report.longrepr = "freezeframe strict: " + "\n".join(lines)
    return report


def _strict(config: pytest.Config, marked: object) -> bool:
    """``strict=`` on the marker, else FREEZEFRAME_STRICT, else the ini setting."""
    if marked is not None:
        return bool(marked)
    variable = os.environ.get("FREEZEFRAME_STRICT", "").strip().lower()
    if variable:
        return variable in ("1", "true", "yes", "on")
    return bool(config.getini("freezeframe_strict"))


def _nothing_reached(config: pytest.Config) -> str:
    """Why a freezeframe test's requests may have gone around the proxy."""
    if config.getoption("freezeframe_mode") or config.getini("freezeframe_mode"):
        return (
            "nothing this test sent reached freezeframe's proxy: its client went to the host "
            "directly (a proxy or trust store of its own, NO_PROXY, or a rules= proxy that a "
            "client built at import time does not know)"
        )
    return (
        "nothing this test sent reached freezeframe's proxy: a client built when its module "
        "was imported (client = OpenAI() at module level) read HTTPS_PROXY before the test "
        "set it. Set freezeframe_mode in the pytest configuration (or pass "
        "--freezeframe-mode) and freezeframe sets the environment before test modules load"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    session = terminalreporter.config.stash.get(_SESSION, None)
    if session is None:
        return
    if session.unseen:
        terminalreporter.section("freezeframe: traffic that went around the proxy")
        terminalreporter.write_line(_nothing_reached(terminalreporter.config) + ":")
        for nodeid in session.unseen:
            terminalreporter.write_line(f"  {nodeid}")
    if not session.drifted:
        return
    terminalreporter.section("freezeframe: drift")
    terminalreporter.write_line(
        "replayed, but the request differed from the recording in parts the key leaves out:"
    )
    for drifted in session.drifted:
        for event in drifted.events:
            terminalreporter.write_line(
                f"{drifted.nodeid}: {event.method} {event.url} replayed {event.cassette}"
                f"#{event.seq}, drifted in {event.drift_said()}"
            )


def cassette_name(nodeid: str) -> str:
    """A cassette name for a test: its node id in the characters a name may hold, with a
    digest of the whole id when it has to be shortened."""
    name = _NOT_IN_NAMES.sub("-", nodeid.replace("/", ".").replace(".py::", "::")).strip("-.")
    name = name.replace("..", ".")
    if len(name) > 100:
        digest = hashlib.blake2b(nodeid.encode(), digest_size=6).hexdigest()
        name = f"{name[:87]}-{digest}"
    return name if name[:1].isalnum() else f"t{name}"


def _apply(wanted: dict[str, str | None]) -> None:
    """Set (or, for None, unset) variables in this process, for it and its subprocesses."""
    for name, value in wanted.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def _environment(wanted: dict[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) variables for the test and its subprocesses; restore them."""
    before = {name: os.environ.get(name) for name in wanted}
    try:
        _apply(wanted)
        yield
    finally:
        _apply(before)


def _dies_with_its_parent() -> Callable[[], object] | None:
    """What makes the proxy stop (SIGTERM) when the pytest process that started it ends
    without unconfiguring: an xdist worker torn down, a run killed. Linux only; resolved
    before the fork, so the child only makes the one call."""
    if sys.platform != "linux":
        return None
    import ctypes
    import signal

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass
class Proxy:
    """One ``freezeframe run`` process of this session."""

    process: subprocess.Popen[bytes]
    port: int
    admin_port: int
    log: Path
    data_dir: Path
    health: dict[str, Any] = field(default_factory=dict)
    seen: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @classmethod
    def start(cls, data_dir: Path, rules: str | None, mode: str = "replay") -> Proxy:
        port, admin_port = unused_port(), unused_port()
        fd, log = tempfile.mkstemp(prefix="freezeframe-pytest-", suffix=".log")
        env = {k: v for k, v in os.environ.items() if k not in OWN_SETTINGS}
        # A proxy started in passthrough refuses FREEZEFRAME_PERTURB (it would change nothing
        # there); the session's proxy passes traffic through only between the freezeframe tests
        # that switch it to replay, so it starts in replay and is switched once it is up.
        first = "replay" if mode == "passthrough" and env.get("FREEZEFRAME_PERTURB") else mode
        command = [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "run",
            "--mode",
            first,
            "--data-dir",
            str(data_dir),
            "--listen",
            f"127.0.0.1:{port}",
            "--admin",
            f"127.0.0.1:{admin_port}",
        ]
        if rules is not None:
            command += ["--rules", rules]
        if "FREEZEFRAME_MISS_DETAILS" not in env:
            command.append("--miss-details")  # this proxy answers this session's tests alone
        with os.fdopen(fd, "wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_dies_with_its_parent(),
            )
        proxy = cls(process, port, admin_port, Path(log), data_dir)
        proxy._wait_ready()
        if first != mode:
            proxy.switch(mode, "default")
        return proxy

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise pytest.UsageError(f"freezeframe did not start: {self._last_line()}")
            with contextlib.suppress(OSError):
                self.health = self.get("/health")
                return
            time.sleep(0.1)
        self.stop()
        raise pytest.UsageError(f"freezeframe did not start in {START_TIMEOUT:.0f} s: {self.log}")

    def _last_line(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {self.process.returncode}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.admin_url + path, timeout=10) as answer:
            return json.load(answer)

    def switch(self, mode: str, cassette: str) -> None:
        body = json.dumps({"mode": mode, "cassette": cassette}).encode()
        # JSON, said so: urllib's default form type is what the admin port refuses from a
        # page on another site (proxy/admin/guard.py).
        request = urllib.request.Request(
            self.admin_url + "/api/mode",
            body,
            headers={"content-type": "application/json"},
            method="PUT",
        )
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as exc:
            raise pytest.UsageError(f"freezeframe: {json.load(exc).get('error', exc)}") from None

    def journal_last(self) -> int:
        """The number of the proxy's latest event; asking from the last one seen keeps the
        answer to what came since."""
        self.seen = int(self.get(f"/api/events?after={self.seen}")["last"])
        return self.seen

    def exchange(self, cassette: str, seq: int) -> dict[str, Any]:
        """An exchange the proxy served or recorded; a recording reaches the store shortly
        after its answer has, so it is waited for."""
        deadline = time.monotonic() + STORED_TIMEOUT
        while True:
            try:
                document: dict[str, Any] = self.get(f"/api/cassettes/{cassette}/{seq}")
                return document
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def empty(self, cassette: str) -> None:
        """Record a cassette again from its first exchange, as ``--fresh`` would."""
        from freezeframe.proxy.settings import default_store_url
        from freezeframe.storage import CassetteNotFound, open_store

        url = os.environ.get("FREEZEFRAME_STORE") or default_store_url(self.data_dir)
        with open_store(url) as store:
            with contextlib.suppress(CassetteNotFound):
                store.remove(cassette)

    def client_environment(self) -> dict[str, str | None]:
        from freezeframe.proxy.trust import java_truststore
        from freezeframe.sandbox.wiring import CLEARED, client_environment

        ca, bundle = Path(self.health["ca"]), Path(self.health["ca_bundle"])
        wanted: dict[str, str | None] = dict.fromkeys(CLEARED)
        wanted.update(client_environment(self.url, ca, bundle, java_truststore(ca, bundle)))
        return wanted

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.unlink(missing_ok=True)
