"""Speed benchmark: freezeframe against bare mitmdump, with the same client and upstream.

Run it from the repository root (a full run takes about two minutes, ``--quick`` under one)::

    .venv/bin/python tests/benchmarks/bench_proxy.py            # or: make bench
    .venv/bin/python tests/benchmarks/bench_proxy.py --quick --json bench.json

It is a script, not a test: it asserts nothing about speed. It prints tables and, with
``--json FILE``, writes the same numbers (plus run metadata) to FILE.

Setup
-----
One upstream (``tests/support/upstream.py``'s ``Upstream``: asyncio + h11 + TLS from a
throwaway trustme CA) runs as its own process; the client is this process (httpx, one
``httpx.Client`` per connection, ``proxy=`` explicit, ``trust_env=False``). Client and
upstream are pinned to CPU 0, every proxy under test to CPU 1 (``taskset``), so the proxy
has a core of its own and its cost is neither hidden by nor mixed into the client's.

Scenarios (each its own proxy process):

* ``no proxy``: client -> upstream directly; the floor.
* ``passthrough``: bare ``mitmdump -q``; every ``x pt`` ratio divides by this row.
* ``passthrough+stream``: the same with ``--set stream_large_bodies=1``. mitmdump buffers
  an SSE answer whole by default; this is the fair reference for a stream's first byte.
* ``mitmdump -w``: mitmproxy's own recorder.
* ``freezeframe record``: ``python -m cli run --mode record``.
* (the upstream is stopped here: the replays below must answer without it)
* ``mitmdump -S``: mitmproxy's server replay of the ``-w`` file, with
  ``server_replay_reuse`` (one recorded flow answers every identical request),
  ``server_replay_extra=kill`` and ``connection_strategy=lazy``.
* ``freezeframe replay``: ``--mode replay`` on the data dir recorded above (default pace:
  a recorded stream is replayed with its recorded timing).
* ``ff replay instant``: the same with ``--replay-pace instant`` (on a copy of the data
  dir), the like-for-like comparison with ``mitmdump -S`` for the stream.

The scenarios run in two phases, live (the first five) and replay (the last three). Within
a phase all proxies are up at once and the workloads are *interleaved*: blocks of requests
go to each scenario in turn (the order rotates every block), and after each block the
client waits until that proxy is idle again. A burst of load from elsewhere on the machine
thus hits every scenario alike, instead of whichever happened to be running.

Workloads, the same requests in the same order for every scenario, so that a replay sees
exactly what was recorded (freezeframe answers the n-th identical request with the n-th
recording):

* ``seq``: one keep-alive HTTPS connection, sequential ~20 KB OpenAI chat-completion POSTs,
  every body different (``tests/support/agent_traffic.py``'s prose, drawn afresh for each);
  warm-up first, then p50/p99 latency and requests/s.
* ``conc``: 16 connections at once (a thread and a client each, connected and warmed by one
  request before the clock starts), each an agent's conversation that grows turn by turn
  (system prompt, six tool schemas, every earlier message; a new conversation every
  ``CONVERSATION_TURNS`` turns); requests/s over the wall time, and p50/p99 latency.
* ``same``: the secondary row: sequential POSTs of one ~20 KB body, again and again. A
  content-addressed store keeps that body once, so this row shows the deduplicator, not
  the recorder; it is here so that a change to either can be told apart.
* ``sse``: a 50-event ``text/event-stream`` (chunked, 2 ms between events); time to the
  first body byte (TTFB) and to the end of the stream, p50 over the streams.

Reading the tables
------------------
Absolute times move from run to run and machine to machine; compare the ``x pt`` columns,
which divide by the bare ``passthrough`` row of the same run (for latency, lower is better;
for ``req/s x pt``, higher is better). The replay rows are measured in the second phase, so
their ratios against passthrough cross phases; replay-vs-replay comparisons are within one.
``proxy CPU/req`` is the proxy's CPU time (user+sys, all threads, psutil, with its child
processes: freezeframe's store writer) per timed request, the steadiest column: it does not
depend on which side was the bottleneck. ``own CPU/req`` is the proxy's process alone,
without its store writer process: the CPU its event loop competes for.
``client core`` is how busy CPU 0 (client + upstream) was during that scenario's blocks;
near 100% means the row's throughput was bounded by the client side, not by the proxy.
The header line reports ``other load``: CPU used by processes outside the benchmark during
each phase. Above ~10% of a CPU the run was shared with something else; trust ratios over
absolute numbers, and rerun if it matters. ``stored`` gives the recorders' bytes on disk per
recorded request (freezeframe: SQLite DB + WAL after SIGTERM; mitmdump: the ``-w`` file).
The ``targets`` table restates the team's targets next to the measured values; it is
information, not a gate.

Everything binds 127.0.0.1 only; every loop and wait is bounded; every child runs in its
own process group and is killed in ``finally``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import platform
import random
import selectors
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))

from support.agent_traffic import Conversation, prose  # noqa: E402

CLIENT_CPU = 0
PROXY_CPU = 1

START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
REQUEST_TIMEOUT = 15.0
WORKLOAD_BUDGET = 180.0  # per workload and phase, whatever happens
IDLE_STEP = 0.02  # after a block, poll the proxy's CPU this often ...
IDLE_QUIET = 0.0005  # ... until it used less than this in one step ...
IDLE_LIMIT = 2.0  # ... or this long has passed

API_KEY = "sk-bench-" + "0123456789abcdefghij" * 2
CHAT_PATH = "/v1/chat/completions"
SSE_EVENTS = 50
SSE_GAP_MS = 2
CONVERSATION_TURNS = 25

PASSTHROUGH = "passthrough"
STREAMING = "passthrough+stream"
FF_RECORD = "freezeframe record"
FF_RECORD_THREAD = "ff record, thread"
FF_RECORD_AGAINST = "ff record, against"
FF_REPLAY_AGAINST = "ff replay, against"
"""``--writer-thread``: recording with the store's writer as a thread of the proxy."""
FF_REPLAY = "freezeframe replay"
FF_INSTANT = "ff replay instant"
MITM_REPLAY = "mitmdump -S"
MITM_RECORD = "mitmdump -w"


# -- configuration -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    warmup: int  # sequential requests before the clock starts
    sequential: int  # timed sequential requests
    seq_block: int  # sequential requests per interleaved block
    concurrency: int  # connections in the concurrent workload
    per_connection: int  # timed requests per connection
    conc_block: int  # requests per connection per interleaved block
    sse_warmup: int
    sse_streams: int
    same: int  # timed sequential requests of the one repeated body

    @property
    def requests_per_scenario(self) -> int:
        return (
            self.warmup
            + self.sequential
            + self.concurrency * (1 + self.per_connection)
            + self.sse_warmup
            + self.sse_streams
            + self.same
        )


FULL = Config(
    warmup=50,
    sequential=500,
    seq_block=50,
    concurrency=16,
    per_connection=100,
    conc_block=10,
    sse_warmup=3,
    sse_streams=30,
    same=200,
)
QUICK = Config(
    warmup=20,
    sequential=100,
    seq_block=25,
    concurrency=16,
    per_connection=10,
    conc_block=5,
    sse_warmup=2,
    sse_streams=10,
    same=50,
)


def chat_body(target_size: int = 20_000) -> bytes:
    """An OpenAI chat-completion request of about ``target_size`` bytes: a long conversation."""
    filler = (
        "The agent inspected the repository, ran the failing test, read the traceback and "
        "proposed a patch to the parser that keeps byte offsets stable across retries. "
    )
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a careful coding agent. Answer tersely."}
    ]
    turn = 0
    while len(json.dumps(messages)) < target_size - 400:
        role = "user" if turn % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"[turn {turn}] " + filler * 3})
        turn += 1
    messages.append({"role": "user", "content": "Summarise what you did in one sentence."})
    body = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "temperature": 0.2,
        "max_tokens": 256,
        "user": "bench",
    }
    return json.dumps(body, separators=(",", ":")).encode()


BODY = chat_body()


class Bodies:
    """The request bodies of the workloads, made once and sent in the same order to every
    scenario: a replay sees exactly what was recorded."""

    def __init__(self, cfg: Config) -> None:
        self.unique = [unique_body(n) for n in range(cfg.warmup + cfg.sequential)]
        self.conversations = [
            conversation_bodies(i, 1 + cfg.per_connection) for i in range(cfg.concurrency)
        ]


def unique_body(n: int, target_size: int = 20_000) -> bytes:
    """The ``n``-th of the sequential workload's bodies: ~20 KB, its words drawn afresh."""
    rng = random.Random(n)
    messages: list[dict[str, str]] = [{"role": "system", "content": prose(rng, 120)}]
    while len(json.dumps(messages)) < target_size - 400:
        role = "user" if len(messages) % 2 else "assistant"
        messages.append({"role": role, "content": prose(rng, 90)})
    body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2, "user": "bench"}
    return json.dumps(body, separators=(",", ":")).encode()


def conversation_bodies(connection: int, count: int) -> list[bytes]:
    """The requests of one connection's agent: conversations of ``CONVERSATION_TURNS``."""
    bodies: list[bytes] = []
    while len(bodies) < count:
        seed = 1_000_000 * (connection + 1) + len(bodies)
        turns = min(CONVERSATION_TURNS, count - len(bodies))
        bodies += Conversation(seed=seed).turns(turns)
    return bodies


HEADERS = {
    "content-type": "application/json",
    "authorization": f"Bearer {API_KEY}",
    "user-agent": "freezeframe-bench/1",
}


# -- child processes -----------------------------------------------------------------------


def _child_env(checkout: Path | None = None) -> dict[str, str]:
    """The environment of a child: no proxy or freezeframe variables, and this checkout's
    code first on the path (``checkout``'s instead, for --against)."""
    env = dict(os.environ)
    for name in list(env):
        upper = name.upper()
        if upper.startswith("FREEZEFRAME_") or upper in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "NO_PROXY",
        ):
            del env[name]
    root = checkout or ROOT
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "tests")])
    return env


def _pinned(cmd: list[str], cpu: int | None) -> list[str]:
    if cpu is None:
        return cmd
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(cpu), *cmd] if taskset else cmd


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Child:
    """A subprocess in its own process group, pinned to one CPU, always killed at the end."""

    def __init__(
        self,
        name: str,
        cmd: list[str],
        log_path: Path,
        cpu: int | None,
        *,
        pipe: bool = False,
        checkout: Path | None = None,
    ) -> None:
        self.checkout = checkout
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self.cpu = cpu
        self.pipe = pipe
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Child:
        preexec: Callable[[], None] | None = None
        if self.cpu is not None and not shutil.which("taskset"):
            cpu = self.cpu

            def preexec() -> None:
                os.sched_setaffinity(0, {cpu})

        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                _pinned(self.cmd, self.cpu),
                stdout=subprocess.PIPE if self.pipe else log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                env=_child_env(self.checkout),
                start_new_session=True,
                preexec_fn=preexec,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def read_line(self, timeout: float) -> str:
        """One line of the child's stdout, waiting at most ``timeout`` seconds."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise RuntimeError(f"{self.name}: no output in {timeout}s\n{self.log_tail()}")
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"{self.name} exited early:\n{self.log_tail()}")
                buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM the main process (an orderly stop), then SIGKILL the group if needed."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        code = self.proc.poll()
        self.kill()
        return code

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def cpu_seconds(self, *, own: bool = False) -> float:
        """CPU of the proxy and its live child processes (freezeframe's store writer), or
        with ``own`` of the proxy's process alone (its event loop and threads)."""
        if not self.alive():
            return math.nan
        try:
            process = psutil.Process(self.pid)
            family = [process, *([] if own else process.children(recursive=True))]
            total = 0.0
            for member in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    times = member.cpu_times()
                    total += times.user + times.system
        except psutil.Error:
            return math.nan
        return total


def wait_until(check: Callable[[], bool], timeout: float, what: str, child: Child) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited while {what}:\n{child.log_tail()}")
        with contextlib.suppress(OSError, httpx.HTTPError):
            if check():
                return
        time.sleep(0.05)
    raise RuntimeError(f"{child.name}: timed out {what}:\n{child.log_tail()}")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def task_cpu_ns(pid: int) -> int | None:
    """CPU time of all of ``pid``'s live threads, in ns (``/proc/*/task/*/schedstat``).

    Much finer than psutil's clock ticks (10 ms), which matters for short blocks; but the
    time of threads that already exited is lost, so totals come from psutil instead.
    """
    total = 0
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return None
    for task in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"{task.path}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


def family_cpu_ns(pid: int) -> int | None:
    """task_cpu_ns() of ``pid`` and of its live descendants (freezeframe's store writer)."""
    total = task_cpu_ns(pid)
    if total is None:
        return None
    with contextlib.suppress(psutil.Error):
        for member in psutil.Process(pid).children(recursive=True):
            total += task_cpu_ns(member.pid) or 0
    return total


def wait_idle(child: Child | None) -> None:
    """Wait (bounded) until the proxy stops using CPU: a recorder may still be writing."""
    if child is None or not child.alive():
        return
    last = family_cpu_ns(child.pid)
    if last is None:
        time.sleep(0.25)
        return
    deadline = time.monotonic() + IDLE_LIMIT
    while time.monotonic() < deadline:
        time.sleep(IDLE_STEP)
        now = family_cpu_ns(child.pid)
        if now is None or now - last < IDLE_QUIET * 1e9:
            return
        last = now


def system_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle since boot."""
    t = psutil.cpu_times()
    # guest time is already in user; steal is the hypervisor's, not this machine's
    fields = ("user", "nice", "system", "irq", "softirq")
    return float(sum(getattr(t, f, 0.0) for f in fields))


# -- scenarios and the processes behind them -----------------------------------------------


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "direct", "mitmdump" or "freezeframe"
    args: tuple[str, ...] = ()
    data_dir: str = "freezeframe-data"  # freezeframe only; under the work directory
    records: bool = False
    checkout: Path | None = None
    """freezeframe only: run this checkout's code instead of this one's (--against)."""


def live_scenarios(
    flow_file: Path, writer_thread: bool = False, against: Path | None = None
) -> list[Scenario]:
    thread = Scenario(
        FF_RECORD_THREAD,
        "freezeframe",
        ("--mode", "record", "--store-writer", "thread"),
        data_dir="freezeframe-data-thread",
        records=True,
    )
    return [
        Scenario("no proxy", "direct"),
        Scenario(PASSTHROUGH, "mitmdump"),
        Scenario(STREAMING, "mitmdump", ("--set", "stream_large_bodies=1")),
        Scenario(MITM_RECORD, "mitmdump", ("-w", str(flow_file)), records=True),
        Scenario(FF_RECORD, "freezeframe", ("--mode", "record"), records=True),
        *([thread] if writer_thread else []),
        *(
            [
                Scenario(
                    FF_RECORD_AGAINST,
                    "freezeframe",
                    ("--mode", "record"),
                    data_dir="freezeframe-data-against",
                    records=True,
                    checkout=against,
                )
            ]
            if against
            else []
        ),
    ]


def replay_scenarios(flow_file: Path, against: Path | None = None) -> list[Scenario]:
    other = Scenario(
        FF_REPLAY_AGAINST,
        "freezeframe",
        ("--mode", "replay"),
        data_dir="freezeframe-data-against",
        checkout=against,
    )
    return [
        *([other] if against else []),
        Scenario(
            MITM_REPLAY,
            "mitmdump",
            (
                "-S",
                str(flow_file),
                "--set",
                "server_replay_reuse=true",
                "--set",
                "server_replay_extra=kill",
                "--set",
                "connection_strategy=lazy",
            ),
        ),
        Scenario(FF_REPLAY, "freezeframe", ("--mode", "replay")),
        Scenario(
            FF_INSTANT,
            "freezeframe",
            ("--mode", "replay", "--replay-pace", "instant"),
            data_dir="freezeframe-data-instant",
        ),
    ]


class Env:
    """The work directory, the upstream, and every child process started from here."""

    def __init__(self, tmp: Path, pin: bool) -> None:
        self.tmp = tmp
        self.pin = pin
        self.upstream: Child | None = None
        self.upstream_port = 0
        self.upstream_ca = tmp / "upstream-ca.pem"
        self.confdir = tmp / "mitmdump-conf"
        self.flow_file = tmp / "mitmdump.flows"
        self.children: list[Child] = []

    def cpu(self, which: int) -> int | None:
        return which if self.pin else None

    def start_upstream(self) -> None:
        cmd = [sys.executable, str(HERE / "upstream_server.py"), "--ca-out", str(self.upstream_ca)]
        child = Child("upstream", cmd, self.tmp / "upstream.log", self.cpu(CLIENT_CPU), pipe=True)
        self.children.append(child.start())
        self.upstream = child
        self.upstream_port = int(json.loads(child.read_line(START_TIMEOUT))["port"])

    def stop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.stop(timeout=8.0)
        deadline = time.monotonic() + 5.0
        while port_open(self.upstream_port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if port_open(self.upstream_port):
            raise RuntimeError("the upstream still listens after it was stopped")

    def upstream_cpu_ns(self) -> int:
        if self.upstream is None or not self.upstream.alive():
            return 0
        return task_cpu_ns(self.upstream.pid) or 0

    def start(self, scenario: Scenario) -> tuple[Child | None, str | None, Path | None]:
        """Start the scenario's proxy: (child, proxy URL, proxy CA) once it is ready."""
        if scenario.kind == "direct":
            return None, None, None
        port = free_port()
        log = self.tmp / f"{scenario.name.replace(' ', '_')}.log"
        if scenario.kind == "mitmdump":
            mitmdump = BIN / "mitmdump"
            cmd = [
                str(mitmdump if mitmdump.exists() else shutil.which("mitmdump") or "mitmdump"),
                "-q",
                "--listen-host",
                "127.0.0.1",
                "--listen-port",
                str(port),
                "--set",
                f"confdir={self.confdir}",
                "--set",
                f"ssl_verify_upstream_trusted_ca={self.upstream_ca}",
                *scenario.args,
            ]
            child = Child(scenario.name, cmd, log, self.cpu(PROXY_CPU))
            self.children.append(child.start())
            ca = self.confdir / "mitmproxy-ca-cert.pem"
            wait_until(lambda: port_open(port) and ca.exists(), START_TIMEOUT, "starting", child)
            return child, f"http://127.0.0.1:{port}", ca
        admin = free_port()
        data_dir = self.tmp / scenario.data_dir
        cmd = [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "run",
            "--data-dir",
            str(data_dir),
            "--listen",
            f"127.0.0.1:{port}",
            "--admin",
            f"127.0.0.1:{admin}",
            "--upstream-ca",
            str(self.upstream_ca),
            *scenario.args,
        ]
        child = Child(scenario.name, cmd, log, self.cpu(PROXY_CPU), checkout=scenario.checkout)
        self.children.append(child.start())

        def healthy() -> bool:
            with httpx.Client(trust_env=False, timeout=1.0) as admin_client:
                return admin_client.get(f"http://127.0.0.1:{admin}/health").status_code == 200

        wait_until(healthy, START_TIMEOUT, "waiting for /health", child)
        return child, f"http://127.0.0.1:{port}", data_dir / "mitmproxy-ca-cert.pem"

    def close(self) -> None:
        for child in reversed(self.children):
            child.kill()


# -- the client ----------------------------------------------------------------------------


def client_context(*cas: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and host name
    for ca in cas:
        if ca is not None:
            ctx.load_verify_locations(cafile=str(ca))
    return ctx


def post_chat(client: httpx.Client, url: str, body: bytes) -> bool:
    """One chat completion; True if it was answered in full with a real completion."""
    try:
        response = client.post(url, content=body, headers=HEADERS)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and b'"chat.completion"' in response.content


def get_stream(client: httpx.Client, url: str) -> tuple[bool, float, float]:
    """One SSE stream: (complete?, seconds to the first body byte, seconds to the end)."""
    t0 = time.perf_counter()
    first = math.nan
    data = bytearray()
    status = 0
    try:
        with client.stream("GET", url, headers={"accept": "text/event-stream"}) as response:
            status = response.status_code
            for chunk in response.iter_raw():
                if chunk and math.isnan(first):
                    first = time.perf_counter()
                data += chunk
    except httpx.HTTPError:
        status = -1
    end = time.perf_counter()
    ok = status == 200 and data.count(b"data: ") == SSE_EVENTS
    return ok, first - t0, end - t0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclasses.dataclass
class Tally:
    """What one scenario's blocks of one workload added up to."""

    latencies: list[float] = dataclasses.field(default_factory=list)
    ttfb: list[float] = dataclasses.field(default_factory=list)
    wall: float = 0.0  # seconds the timed requests took (for requests/s)
    block_wall: float = 0.0  # seconds the blocks took, for the CPU-0 share
    errors: int = 0
    sent: int = 0
    client_cpu: float = 0.0
    upstream_cpu: float = 0.0
    proxy_cpu: float = math.nan
    own_cpu: float = math.nan  # the proxy's process alone, without its writer process

    def summary(self, stream: bool) -> dict[str, Any]:
        n = len(self.latencies)
        out: dict[str, Any] = {"n": n, "sent": self.sent, "errors": self.errors}
        if stream:
            out |= {
                "ttfb_p50_ms": percentile(self.ttfb, 50) * 1000,
                "ttfb_p99_ms": percentile(self.ttfb, 99) * 1000,
                "total_p50_ms": percentile(self.latencies, 50) * 1000,
                "total_p99_ms": percentile(self.latencies, 99) * 1000,
            }
        else:
            out |= {
                "p50_ms": percentile(self.latencies, 50) * 1000,
                "p99_ms": percentile(self.latencies, 99) * 1000,
                "mean_ms": sum(self.latencies) / n * 1000 if n else math.nan,
                "rps": n / self.wall if self.wall > 0 else math.nan,
                "wall_s": self.wall,
            }
        out["proxy_cpu_ms_per_req"] = self.proxy_cpu * 1000 / n if n else math.nan
        out["own_cpu_ms_per_req"] = self.own_cpu * 1000 / n if n else math.nan
        busy = self.client_cpu + self.upstream_cpu
        out["client_core_busy"] = busy / self.block_wall if self.block_wall > 0 else math.nan
        return out


class Target:
    """One scenario under measurement: its proxy, its clients, its tallies."""

    def __init__(self, env: Env, scenario: Scenario) -> None:
        self.env = env
        self.scenario = scenario
        self.name = scenario.name
        self.child, self.proxy_url, ca = env.start(scenario)
        self.ctx = client_context(env.upstream_ca, ca)
        self.tallies = {"seq": Tally(), "conc": Tally(), "sse": Tally(), "same": Tally()}
        self.clients: list[httpx.Client] = []

    def client(self) -> httpx.Client:
        client = httpx.Client(
            proxy=self.proxy_url,
            verify=self.ctx,
            trust_env=False,
            timeout=REQUEST_TIMEOUT,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        self.clients.append(client)
        return client

    def proxy_cpu_seconds(self, *, own: bool = False) -> float:
        return self.child.cpu_seconds(own=own) if self.child else 0.0

    def block(self, tally: Tally, body: Callable[[], float]) -> None:
        """Run one timed block (``body`` returns the seconds its requests took), then wait
        until the proxy is idle so that nothing it still does spills into the next block."""
        c0, u0, w0 = time.process_time(), self.env.upstream_cpu_ns(), time.perf_counter()
        tally.wall += body()
        w1, c1, u1 = time.perf_counter(), time.process_time(), self.env.upstream_cpu_ns()
        tally.block_wall += w1 - w0
        tally.client_cpu += c1 - c0
        tally.upstream_cpu += max(0, u1 - u0) / 1e9
        wait_idle(self.child)

    def close_clients(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()
        self.clients.clear()


def rotated(targets: list[Target], k: int) -> list[Target]:
    k %= max(1, len(targets))
    return targets[k:] + targets[:k]


class Meter:
    """psutil CPU totals of every proxy over a workload (clock ticks, but all threads)."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self.start = {t.name: t.proxy_cpu_seconds() for t in targets}
        self.own = {t.name: t.proxy_cpu_seconds(own=True) for t in targets}

    def finish(self, workload: str) -> None:
        for t in self.targets:
            wait_idle(t.child)
            t.tallies[workload].proxy_cpu = t.proxy_cpu_seconds() - self.start[t.name]
            t.tallies[workload].own_cpu = t.proxy_cpu_seconds(own=True) - self.own[t.name]


# -- the workloads, interleaved ------------------------------------------------------------


def workload_seq(
    targets: list[Target],
    cfg: Config,
    chat: str,
    workload: str,
    body_of: Callable[[int], bytes],
    warmup: int,
    timed: int,
) -> None:
    """One connection per scenario, ``warmup`` then ``timed`` POSTs, the n-th request of
    every scenario carrying ``body_of(n)``."""
    deadline = time.perf_counter() + WORKLOAD_BUDGET
    clients = {t.name: t.client() for t in targets}
    for t in targets:
        tally = t.tallies[workload]
        for _ in range(warmup):
            tally.errors += not post_chat(clients[t.name], chat, body_of(tally.sent))
            tally.sent += 1
        wait_idle(t.child)
    meter = Meter(targets)
    done = 0
    k = 0
    while done < timed and time.perf_counter() < deadline:
        count = min(cfg.seq_block, timed - done)
        for t in rotated(targets, k):
            tally, client = t.tallies[workload], clients[t.name]

            def body(
                tally: Tally = tally, client: httpx.Client = client, count: int = count
            ) -> float:
                start = time.perf_counter()
                for _ in range(count):
                    if time.perf_counter() > deadline:
                        break
                    t0 = time.perf_counter()
                    ok = post_chat(client, chat, body_of(tally.sent))
                    tally.latencies.append(time.perf_counter() - t0)
                    tally.errors += not ok
                    tally.sent += 1
                return time.perf_counter() - start

            t.block(tally, body)
        done += count
        k += 1
    meter.finish(workload)


def _in_threads(count: int, work: Callable[[int], None], timeout: float) -> float:
    """Run ``work(i)`` in ``count`` threads released together; the seconds until all end."""
    barrier = threading.Barrier(count + 1, timeout=30.0)

    def run(i: int) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        work(i)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait()
    start = time.perf_counter()
    end = start + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.perf_counter()))
    return time.perf_counter() - start


def workload_conc(targets: list[Target], cfg: Config, chat: str, bodies: Bodies) -> None:
    deadline = time.perf_counter() + WORKLOAD_BUDGET
    conns: dict[str, list[httpx.Client]] = {}
    turns: dict[str, list[int]] = {t.name: [0] * cfg.concurrency for t in targets}
    lock = threading.Lock()

    def post_turn(t: Target, i: int) -> bool:
        """Connection ``i``'s next turn (only its own thread touches its counter)."""
        n = turns[t.name][i]
        turns[t.name][i] = n + 1
        return post_chat(conns[t.name][i], chat, bodies.conversations[i][n])

    for t in targets:  # connect every client (CONNECT, TLS) with one request, off the clock
        conns[t.name] = [t.client() for _ in range(cfg.concurrency)]
        tally = t.tallies["conc"]

        def connect(i: int, t: Target = t, tally: Tally = tally) -> None:
            ok = post_turn(t, i)
            with lock:
                tally.errors += not ok
                tally.sent += 1

        _in_threads(cfg.concurrency, connect, REQUEST_TIMEOUT * 2)
        wait_idle(t.child)
    meter = Meter(targets)
    done = 0
    k = 0
    while done < cfg.per_connection and time.perf_counter() < deadline:
        count = min(cfg.conc_block, cfg.per_connection - done)
        for t in rotated(targets, k):
            tally = t.tallies["conc"]

            def work(i: int, t: Target = t, tally: Tally = tally, count: int = count) -> None:
                latencies: list[float] = []
                errors = 0
                for _ in range(count):
                    if time.perf_counter() > deadline:
                        break
                    t0 = time.perf_counter()
                    errors += not post_turn(t, i)
                    latencies.append(time.perf_counter() - t0)
                with lock:
                    tally.latencies += latencies
                    tally.errors += errors
                    tally.sent += len(latencies)

            def body(work: Callable[[int], None] = work) -> float:
                return _in_threads(cfg.concurrency, work, WORKLOAD_BUDGET + REQUEST_TIMEOUT)

            t.block(tally, body)
        done += count
        k += 1
    meter.finish("conc")


def workload_sse(targets: list[Target], cfg: Config, url: str) -> None:
    deadline = time.perf_counter() + WORKLOAD_BUDGET
    clients = {t.name: t.client() for t in targets}
    for t in targets:
        tally = t.tallies["sse"]
        for _ in range(cfg.sse_warmup):
            tally.errors += not get_stream(clients[t.name], url)[0]
            tally.sent += 1
        wait_idle(t.child)
    meter = Meter(targets)
    for k in range(cfg.sse_streams):
        if time.perf_counter() > deadline:
            break
        for t in rotated(targets, k):
            tally, client = t.tallies["sse"], clients[t.name]

            def body(tally: Tally = tally, client: httpx.Client = client) -> float:
                ok, ttfb, total = get_stream(client, url)
                tally.sent += 1
                tally.errors += not ok
                if ok:
                    tally.ttfb.append(ttfb)
                    tally.latencies.append(total)
                return total

            t.block(tally, body)
    meter.finish("sse")


# -- the run -------------------------------------------------------------------------------


def run_phase(
    env: Env,
    scenarios: list[Scenario],
    cfg: Config,
    bodies: Bodies,
    say: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start every scenario of the phase, run the three workloads interleaved, stop them."""
    results: dict[str, Any] = {}
    targets: list[Target] = []
    base = f"https://127.0.0.1:{env.upstream_port}"
    started = time.perf_counter()
    try:
        for scenario in scenarios:
            try:
                targets.append(Target(env, scenario))
            except RuntimeError as exc:  # report it and measure the others
                say(f"{scenario.name} did not start: {exc}")
                results[scenario.name] = {"error": str(exc)}
        names = ", ".join(t.name for t in targets)
        say(f"{len(targets)} scenarios side by side: {names}")
        ours0 = time.process_time() + env.upstream_cpu_ns() / 1e9
        ours0 += sum(t.proxy_cpu_seconds() for t in targets)
        busy0, wall0 = system_busy_seconds(), time.perf_counter()
        chat = base + CHAT_PATH
        workloads: list[tuple[str, Callable[[], None]]] = [
            (
                "seq",
                lambda: workload_seq(
                    targets,
                    cfg,
                    chat,
                    "seq",
                    bodies.unique.__getitem__,
                    cfg.warmup,
                    cfg.sequential,
                ),
            ),
            ("conc", lambda: workload_conc(targets, cfg, chat, bodies)),
            (
                "sse",
                lambda: workload_sse(
                    targets, cfg, f"{base}/sse/slow?events={SSE_EVENTS}&gap_ms={SSE_GAP_MS}"
                ),
            ),
            (
                "same",
                lambda: workload_seq(targets, cfg, chat, "same", lambda _: BODY, 0, cfg.same),
            ),
        ]
        for name, workload in workloads:
            t0 = time.perf_counter()
            workload()
            say(f"  {name}: {time.perf_counter() - t0:.1f} s")
        ours1 = time.process_time() + env.upstream_cpu_ns() / 1e9
        ours1 += sum(t.proxy_cpu_seconds() for t in targets)
        busy1, wall1 = system_busy_seconds(), time.perf_counter()
        other = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / max(1e-9, wall1 - wall0)
    finally:
        for t in targets:
            t.close_clients()
        codes = {t.name: (t.child.stop() if t.child else None) for t in targets}
    for t in targets:
        entry: dict[str, Any] = {
            "workloads": {
                name: tally.summary(stream=name == "sse") for name, tally in t.tallies.items()
            },
            "exit_code": codes[t.name],
        }
        if t.scenario.records and t.scenario.kind == "freezeframe":
            entry["stored"] = stored_freezeframe(env.tmp / t.scenario.data_dir)
        elif t.scenario.records:
            entry["stored"] = stored_mitmdump(env.flow_file)
        errors = sum(w["errors"] for w in entry["workloads"].values())
        if errors:
            say(f"{t.name}: {errors} failed requests; its log ends with:")
            if t.child is not None:
                say(t.child.log_tail(8))
        results[t.name] = entry
    info = {"seconds": time.perf_counter() - started, "other_load": other}
    return results, info


def run(
    cfg: Config,
    pin: bool,
    keep: Path | None,
    say: Callable[[str], None],
    writer_thread: bool = False,
    against: Path | None = None,
) -> dict[str, Any]:
    tmp_obj = None
    if keep is None:
        tmp_obj = tempfile.TemporaryDirectory(prefix="freezeframe-bench-")
        tmp = Path(tmp_obj.name)
    else:
        tmp = keep
        tmp.mkdir(parents=True, exist_ok=True)
    env = Env(tmp, pin)
    bodies = Bodies(cfg)
    try:
        env.start_upstream()
        say("live phase (upstream up)")
        live, live_info = run_phase(
            env, live_scenarios(env.flow_file, writer_thread, against), cfg, bodies, say
        )
        say("stopping the upstream: the replays run without it")
        env.stop_upstream()
        recorded = tmp / "freezeframe-data"
        if recorded.is_dir():
            shutil.copytree(recorded, tmp / "freezeframe-data-instant", dirs_exist_ok=True)
        say("replay phase (upstream down)")
        replay, replay_info = run_phase(
            env, replay_scenarios(env.flow_file, against), cfg, bodies, say
        )
    finally:
        env.close()
        if tmp_obj is not None:
            tmp_obj.cleanup()
    return {
        "scenarios": {**live, **replay},
        "phases": {"live": live_info, "replay": replay_info},
    }


# -- recordings on disk --------------------------------------------------------------------


def stored_freezeframe(data_dir: Path) -> dict[str, Any]:
    files = sorted(data_dir.glob("freezeframe.db*"))
    size = sum(f.stat().st_size for f in files)
    recorded = complete = 0
    breakdown: dict[str, int] = {}
    with contextlib.suppress(sqlite3.Error):
        uri = f"file:{data_dir / 'freezeframe.db'}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            recorded, complete, canonical = db.execute(
                "SELECT count(*), sum(status = 200), sum(length(canonical)) FROM exchanges"
            ).fetchone()
            blobs, blob_bytes = db.execute(
                "SELECT count(*), sum(length(data)) FROM blobs"
            ).fetchone()
            breakdown = {
                "exchanges.canonical bytes": canonical or 0,
                "blobs": blobs or 0,
                "blobs.data bytes": blob_bytes or 0,
            }
    return {
        "files": {f.name: f.stat().st_size for f in files},
        "breakdown": breakdown,
        "bytes": size,
        "recorded": recorded,
        "status_200": complete,
        "bytes_per_request": size / recorded if recorded else math.nan,
    }


def stored_mitmdump(flow_file: Path) -> dict[str, Any]:
    from mitmproxy import io as mitm_io  # only here: the client itself never needs it

    size = flow_file.stat().st_size if flow_file.exists() else 0
    recorded = complete = 0
    with contextlib.suppress(Exception), flow_file.open("rb") as f:
        for flow in mitm_io.FlowReader(f).stream():
            recorded += 1
            response = getattr(flow, "response", None)
            complete += bool(response is not None and response.status_code == 200)
    return {
        "files": {flow_file.name: size},
        "bytes": size,
        "recorded": recorded,
        "status_200": complete,
        "bytes_per_request": size / recorded if recorded else math.nan,
    }


# -- report --------------------------------------------------------------------------------


def _ratio(value: float | None, ref: float | None) -> float:
    if value is None or ref is None or math.isnan(ref) or math.isnan(value) or ref == 0:
        return math.nan
    return value / ref


def _get(results: dict[str, Any], scenario: str, workload: str, field: str) -> float:
    entry = results.get(scenario, {}).get("workloads", {}).get(workload, {})
    value = entry.get(field)
    return math.nan if value is None else float(value)


def derive(results: dict[str, Any]) -> dict[str, Any]:
    """Ratios against bare passthrough, and the team's targets next to measured values."""
    ratios: dict[str, Any] = {}
    for name, entry in results.items():
        if "workloads" not in entry:
            continue

        def vs(workload: str, field: str, ref: str = PASSTHROUGH, name: str = name) -> float:
            return _ratio(_get(results, name, workload, field), _get(results, ref, workload, field))

        ratios[name] = {
            "seq_p50": vs("seq", "p50_ms"),
            "seq_p99": vs("seq", "p99_ms"),
            "seq_rps": vs("seq", "rps"),
            "seq_cpu": vs("seq", "proxy_cpu_ms_per_req"),
            "conc_rps": vs("conc", "rps"),
            "conc_p50": vs("conc", "p50_ms"),
            "conc_p99": vs("conc", "p99_ms"),
            "conc_cpu": vs("conc", "proxy_cpu_ms_per_req"),
            "same_p50": vs("same", "p50_ms"),
            "same_rps": vs("same", "rps"),
            "same_cpu": vs("same", "proxy_cpu_ms_per_req"),
            "sse_ttfb": vs("sse", "ttfb_p50_ms"),
            "sse_total": vs("sse", "total_p50_ms"),
            "sse_ttfb_minus_streaming_ms": _get(results, name, "sse", "ttfb_p50_ms")
            - _get(results, STREAMING, "sse", "ttfb_p50_ms"),
        }

    targets: list[tuple[str, str, bool | None]] = []

    def check(label: str, value: float, text: str, ok: Callable[[float], bool] | None) -> None:
        if not math.isnan(value):
            targets.append((label, text, ok(value) if ok else None))

    rec = ratios.get(FF_RECORD, {})
    mitm = ratios.get(MITM_RECORD, {})
    for label, field, goal, ok in (
        ("record p50, one connection (seq, unique bodies)", "seq_p50", "<= 1.10x", 1.10),
        ("record proxy CPU/request (seq, unique bodies)", "seq_cpu", "<= 1.15x", 1.15),
        ("record req/s, 16 conversations (conc)", "conc_rps", ">= 0.95x", 0.95),
    ):
        value = rec.get(field, math.nan)
        reference = mitm.get(field, math.nan)

        def meets(v: float, bound: float = ok, above: bool = goal.startswith(">")) -> bool:
            return v >= bound if above else v <= bound

        check(
            f"{label} {goal} passthrough",
            value,
            f"{value:.2f}x (mitmdump -w {reference:.2f}x)",
            meets,
        )
    check(
        "  (info) record p50, repeated body (same) vs passthrough",
        rec.get("same_p50", math.nan),
        f"{rec.get('same_p50', math.nan):.2f}x",
        None,
    )
    for workload in ("conc", "seq"):
        value = _ratio(
            _get(results, FF_REPLAY, workload, "rps"), _get(results, MITM_REPLAY, workload, "rps")
        )
        check(
            f"replay {workload} req/s >= 1.2x mitmdump -S",
            value,
            f"{value:.2f}x mitmdump -S",
            lambda v: v >= 1.2,
        )
    delta = _get(results, FF_RECORD, "sse", "ttfb_p50_ms") - _get(
        results, STREAMING, "sse", "ttfb_p50_ms"
    )
    check(
        "record SSE TTFB <= passthrough+stream + 5 ms",
        delta,
        f"{delta:+.2f} ms",
        lambda v: v <= 5.0,
    )
    for name in (FF_REPLAY, FF_INSTANT):
        delta = _get(results, name, "sse", "ttfb_p50_ms") - _get(
            results, MITM_REPLAY, "sse", "ttfb_p50_ms"
        )
        check(f"  (info) {name} SSE TTFB vs mitmdump -S", delta, f"{delta:+.2f} ms", None)
    return {
        "ratios": ratios,
        "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in targets],
    }


def _f(value: float | None, digits: int = 2, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}{suffix}"


def render(run_result: dict[str, Any], derived: dict[str, Any], meta: dict[str, Any]) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(
        file=io.StringIO(), width=200, record=True, force_terminal=False, color_system=None
    )
    results = run_result["scenarios"]
    phases = run_result["phases"]
    ratios = derived["ratios"]
    cfg = meta["config"]

    titles: dict[int, str] = {}

    def table(title: str, columns: list[str]) -> Table:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        titles[id(t)] = title
        for i, col in enumerate(columns):
            t.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
        return t

    def phase(name: str) -> str:
        info = phases.get(name, {})
        return (
            f"{name} {_f(info.get('seconds'), 0, ' s')}, "
            f"other load {_f(100 * info.get('other_load', math.nan), 0, '% of a CPU')}"
        )

    console.print(
        f"freezeframe speed benchmark ({meta['mode']}): {meta['cpus']} CPUs, "
        f"pinned={meta['pinned']}, python {meta['python']}, mitmproxy {meta['mitmproxy']}, "
        f"httpx {meta['httpx']}, request body {meta['body_bytes']} B, "
        f"{meta['requests_per_scenario']} requests per scenario"
    )
    console.print(f"phases: {phase('live')}; {phase('replay')}")
    if any(info.get("other_load", 0.0) > 0.1 for info in phases.values()):
        console.print(
            "WARNING: other processes used CPU during this run; absolute numbers are "
            "inflated and noisy, ratios less so (scenarios were interleaved). Rerun on a "
            "quiet machine for numbers to keep."
        )
    seq = table(
        f"(a) sequential: one connection, {cfg['sequential']} POSTs after {cfg['warmup']} "
        f"warm-up, in blocks of {cfg['seq_block']}, every body different",
        [
            "scenario",
            "p50 ms",
            "p99 ms",
            "req/s",
            "p50 x pt",
            "p99 x pt",
            "req/s x pt",
            "proxy CPU/req ms",
            "CPU x pt",
            "own CPU/req ms",
            "client core",
            "errors",
        ],
    )
    conc = table(
        f"(b) concurrent: {cfg['concurrency']} connections x {cfg['per_connection']} POSTs, "
        f"in blocks of {cfg['conc_block']} per connection, each a conversation growing turn "
        f"by turn ({CONVERSATION_TURNS} turns, then a new one)",
        [
            "scenario",
            "req/s",
            "p50 ms",
            "p99 ms",
            "req/s x pt",
            "p50 x pt",
            "p99 x pt",
            "proxy CPU/req ms",
            "CPU x pt",
            "own CPU/req ms",
            "client core",
            "errors",
        ],
    )
    sse = table(
        f"(c) SSE: {SSE_EVENTS} events {SSE_GAP_MS} ms apart, over {cfg['sse_streams']} "
        f"streams after {cfg['sse_warmup']} warm-up",
        [
            "scenario",
            "TTFB p50 ms",
            "TTFB p99 ms",
            "total p50 ms",
            "total p99 ms",
            "TTFB x pt",
            "TTFB - pt+stream ms",
            "total x pt",
            "errors",
        ],
    )
    same = table(
        f"(d) secondary: one connection, {cfg['same']} POSTs of one repeated body (what the "
        "deduplicator makes of it)",
        ["scenario", "p50 ms", "req/s", "p50 x pt", "req/s x pt", "proxy CPU/req ms", "CPU x pt"],
    )
    failed: list[str] = []
    for name, entry in results.items():
        if "workloads" not in entry:
            failed.append(f"{name}: {entry.get('error', 'no result')}")
            continue
        w, r = entry["workloads"], ratios[name]
        s, c, e, d = w["seq"], w["conc"], w["sse"], w["same"]
        same.add_row(
            name,
            _f(d["p50_ms"]),
            _f(d["rps"], 0),
            _f(r["same_p50"]),
            _f(r["same_rps"]),
            _f(d["proxy_cpu_ms_per_req"]),
            _f(r["same_cpu"]),
        )
        seq.add_row(
            name,
            _f(s["p50_ms"]),
            _f(s["p99_ms"]),
            _f(s["rps"], 0),
            _f(r["seq_p50"]),
            _f(r["seq_p99"]),
            _f(r["seq_rps"]),
            _f(s["proxy_cpu_ms_per_req"]),
            _f(r["seq_cpu"]),
            _f(s["own_cpu_ms_per_req"]),
            _f(s["client_core_busy"] * 100, 0, "%"),
            str(s["errors"]),
        )
        conc.add_row(
            name,
            _f(c["rps"], 0),
            _f(c["p50_ms"]),
            _f(c["p99_ms"]),
            _f(r["conc_rps"]),
            _f(r["conc_p50"]),
            _f(r["conc_p99"]),
            _f(c["proxy_cpu_ms_per_req"]),
            _f(r["conc_cpu"]),
            _f(c["own_cpu_ms_per_req"]),
            _f(c["client_core_busy"] * 100, 0, "%"),
            str(c["errors"]),
        )
        sse.add_row(
            name,
            _f(e["ttfb_p50_ms"]),
            _f(e["ttfb_p99_ms"]),
            _f(e["total_p50_ms"]),
            _f(e["total_p99_ms"]),
            _f(r["sse_ttfb"]),
            _f(r["sse_ttfb_minus_streaming_ms"]),
            _f(r["sse_total"]),
            str(e["errors"]),
        )
    stored = table(
        "stored: bytes on disk after the recorder stopped",
        ["recorder", "recorded", "status 200", "bytes", "bytes/request", "files / content"],
    )
    for name, entry in results.items():
        if "stored" in entry:
            st = entry["stored"]
            parts = {**st["files"], **st.get("breakdown", {})}
            stored.add_row(
                name,
                str(st["recorded"]),
                str(st["status_200"]),
                f"{st['bytes']:,}",
                _f(st["bytes_per_request"], 0),
                ", ".join(f"{k} {v:,}" for k, v in parts.items()),
            )
    targets = table(
        "targets (information only; nothing is asserted)", ["target", "measured", "met"]
    )
    for t in derived["targets"]:
        met = "-" if t["met"] is None else ("yes" if t["met"] else "NO")
        targets.add_row(t["target"], t["measured"], met)
    for t in (seq, conc, sse, same, stored, targets):
        console.print()
        console.print(titles[id(t)])
        console.print(t)
    console.print(
        "x pt = divided by the bare 'passthrough' row (mitmdump -q) of this run; "
        "client core = CPU 0 (client + upstream) busy during that row's blocks."
    )
    for line in failed:
        console.print(f"NOT MEASURED: {line}")
    return console.export_text()


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="freezeframe vs mitmdump speed benchmark (see the module docstring)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer requests (under a minute)")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (logs, recordings)")
    parser.add_argument(
        "--writer-thread",
        action="store_true",
        help="also record with --store-writer thread (the store's writer in the proxy process)",
    )
    parser.add_argument(
        "--against",
        metavar="CHECKOUT",
        type=Path,
        help="also record and replay with another checkout's code (before and after a change, "
        "in the same run)",
    )
    args = parser.parse_args(argv)

    cfg = QUICK if args.quick else FULL
    cpus = os.cpu_count() or 1
    pin = not args.no_pin and cpus >= 2 and hasattr(os, "sched_setaffinity")
    if pin:
        os.sched_setaffinity(0, {CLIENT_CPU})  # this process is the client
    else:
        print("[bench] not pinning processes to CPUs: expect noisier numbers", file=sys.stderr)

    def say(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    from mitmproxy.version import VERSION as mitmproxy_version

    meta: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "cpus": cpus,
        "pinned": pin,
        "python": platform.python_version(),
        "mitmproxy": mitmproxy_version,
        "httpx": httpx.__version__,
        "body_bytes": len(unique_body(0)),
        "config": dataclasses.asdict(cfg),
        "requests_per_scenario": cfg.requests_per_scenario,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    started = time.perf_counter()
    run_result = run(
        cfg,
        pin,
        Path(args.keep) if args.keep else None,
        say,
        args.writer_thread,
        args.against.resolve() if args.against else None,
    )
    meta["seconds"] = time.perf_counter() - started
    derived = derive(run_result["scenarios"])
    print(render(run_result, derived, meta), end="")
    print(f"total run time {meta['seconds']:.0f} s")
    if args.json:
        payload = {"meta": meta, **run_result, **derived}
        Path(args.json).write_text(json.dumps(_json_safe(payload), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
