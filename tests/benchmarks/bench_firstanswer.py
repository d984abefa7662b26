"""A replaying proxy's start as its client sees it: port open, ``/health``, first answer.

Used by ``bench_startup.py --first-answer`` (see its docstring). The measured cassette gets
one exchange recorded through a real ``freezeframe run --mode record`` (a POST over plain
HTTP to a throwaway local server), kept in the data dir with the request it answers, so a
kept store is recorded into once. Each start is then sent that very request the moment its
port accepts (again on every refused or non-replayed answer) and timed until the recorded
answer comes back, while a thread polls ``/health``. ``mitmdump -S`` replays a flow file of
the same exchange, so both answer the same request from a recording; bare ``mitmdump`` has
nothing to answer and is timed until its port accepts.

Plain HTTP, not HTTPS: both proxies would pay the same TLS handshake and leaf certificate on
a first HTTPS request, and the start is what is measured here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
POLL_S = 0.005
ANSWER = b'{"id": "chatcmpl-first", "object": "chat.completion"}'
PATH = "/v1/chat/completions"
BODY = json.dumps({"model": "gpt-4o-mini", "messages": [{"content": "the first step"}]}).encode()


@dataclass(frozen=True, slots=True)
class Start:
    """One start, in seconds from the spawn: 0.0 for a moment not measured."""

    port: float
    health: float
    answer: float
    cpu: float
    """CPU seconds the process and its children had used by the answer (or the port)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _send(proxy: int, target: str) -> bytes | None:
    """The request through the proxy on ``proxy`` (absolute-form, HTTP/1.1, closed after);
    the answer's body when it is the recorded one, None when refused or anything else."""
    head = (
        f"POST {target}{PATH} HTTP/1.1\r\nHost: {target.split('//', 1)[1]}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    try:
        with socket.create_connection(("127.0.0.1", proxy), timeout=30) as sock:
            sock.sendall(head + BODY)
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
    except OSError:
        return None
    status, _, rest = got.partition(b"\r\n")
    if b" 200 " not in status + b" ":
        return None
    return rest.partition(b"\r\n\r\n")[2]


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _health(admin: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", admin), timeout=5) as sock:
            sock.sendall(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (the writer process), as far as they are
    still there to ask."""
    total = 0.0
    try:
        process = psutil.Process(pid)
        for one in [process, *process.children(recursive=True)]:
            with_children = one.cpu_times()
            total += with_children.user + with_children.system
    except psutil.Error:
        pass
    return total


def timed(
    cmd: list[str], port: int, admin: int | None, target: str | None, env: dict[str, str]
) -> Start:
    """Spawn ``cmd`` and time it (see Start); stopped with SIGKILL after."""
    log = Path(os.devnull).open("wb")
    began = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True, env=env)
    health = [0.0]

    def poll_health() -> None:
        assert admin is not None
        while child.poll() is None and time.perf_counter() - began < START_TIMEOUT_S:
            if _health(admin):
                health[0] = time.perf_counter() - began
                return
            time.sleep(POLL_S)

    poller = threading.Thread(target=poll_health, daemon=True)
    if admin is not None:
        poller.start()
    try:
        opened = answered = 0.0
        while time.perf_counter() - began < START_TIMEOUT_S:
            if child.poll() is not None:
                raise SystemExit(f"{cmd[0]} {' '.join(cmd[1:4])} exited with {child.returncode}")
            if not opened and _accepts(port):
                opened = time.perf_counter() - began
            if opened and target is None:
                break
            if opened and _send(port, target or "") == ANSWER:
                answered = time.perf_counter() - began
                break
            time.sleep(POLL_S)
        else:
            raise SystemExit(f"{cmd[0]} did not answer within {START_TIMEOUT_S:.0f} s")
        cpu = _cpu(child.pid)
        if admin is not None:
            poller.join(START_TIMEOUT_S)
        return Start(opened, health[0], answered, cpu)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        log.close()


class _Upstream(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def recorded(data_dir: Path, cassette: str, env: dict[str, str]) -> str:
    """The target (``http://127.0.0.1:PORT``) of the exchange recorded into ``cassette``
    once; the mitmdump flow file of it is ``data_dir/first.flows``."""
    marker = data_dir / "first-answer"
    if marker.exists():
        return marker.read_text()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{server.server_address[1]}"
    port, admin = free_port(), free_port()
    cmd = freezeframe(data_dir, cassette, port, admin, mode="record")
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.perf_counter() + START_TIMEOUT_S
        while _send(port, target) != ANSWER:
            if time.perf_counter() > deadline or child.poll() is not None:
                raise SystemExit("could not record the first-answer exchange")
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(60)
        server.shutdown()
    _flow_file(data_dir / "first.flows", target)
    marker.write_text(target)
    return target


def _flow_file(path: Path, target: str) -> None:
    from mitmproxy import http
    from mitmproxy import io as mitm_io
    from mitmproxy.test import tflow

    request = http.Request.make("POST", target + PATH, BODY, {"Content-Type": "application/json"})
    response = http.Response.make(200, ANSWER, {"Content-Type": "application/json"})
    with path.open("wb") as file:
        mitm_io.FlowWriter(file).add(tflow.tflow(req=request, resp=response))


def freezeframe(
    data_dir: Path, cassette: str, port: int, admin: int, mode: str = "replay"
) -> list[str]:
    return [
        *(sys.executable, "-P", "-m", "freezeframe", "run", "--mode", mode),
        *("--cassette", cassette, "--data-dir", str(data_dir)),
        *("--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{admin}"),
    ]


def mitmdump(port: int, flows: Path | None) -> list[str]:
    command = [str(Path(sys.executable).parent / "mitmdump"), "-q", "--listen-host"]
    command += ["127.0.0.1", "-p", str(port)]
    return command + (["-S", str(flows), "--server-replay-reuse"] if flows else [])


def checkout_env(checkout: Path) -> dict[str, str]:
    """This interpreter's environment with ``checkout`` first on the path."""
    return os.environ | {"PYTHONPATH": str(checkout)}


def compiled(checkout: Path) -> None:
    """Byte-compile ``checkout``'s modules, as installing the wheel does: with
    PYTHONDONTWRITEBYTECODE set (this sandbox sets it) every start would compile from source
    whatever changed since the last import that could write its cache. The packages are the
    checkout's top folders (as ``make test`` compiles them)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-x", "/(\\.venv|node_modules|build)/"]
        + [str(checkout)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def compare(
    data_dir: Path, cassette: str, runs: int, checkouts: dict[str, Path]
) -> dict[str, list[Start]]:
    """Every scenario ``runs`` times, alternating: each checkout's replay, ``mitmdump -S``,
    bare ``mitmdump``."""
    for checkout in checkouts.values():
        compiled(checkout)
    first = next(iter(checkouts.values()))
    target = recorded(data_dir, cassette, checkout_env(first))
    scenarios: dict[str, Callable[[], Start]] = {}
    for name, checkout in checkouts.items():

        def replay(checkout: Path = checkout) -> Start:
            port, admin = free_port(), free_port()
            command = freezeframe(data_dir, cassette, port, admin)
            return timed(command, port, admin, target, checkout_env(checkout))

        scenarios[f"freezeframe {name}"] = replay

    def replay_flows() -> Start:
        port = free_port()
        return timed(mitmdump(port, data_dir / "first.flows"), port, None, target, dict(os.environ))

    def bare() -> Start:
        port = free_port()
        return timed(mitmdump(port, None), port, None, None, dict(os.environ))

    scenarios |= {"mitmdump -S": replay_flows, "mitmdump": bare}
    results: dict[str, list[Start]] = {name: [] for name in scenarios}
    for _ in range(runs):
        for name, scenario in scenarios.items():
            results[name].append(scenario())
    return results


def report(results: dict[str, list[Start]]) -> list[str]:
    """One line per scenario: the least of its runs for each moment, and the ratio of the
    first answer (or the port) to ``mitmdump -S``'s (bare ``mitmdump``'s)."""
    reference = min(s.answer for s in results["mitmdump -S"])
    bare_port = min(s.port for s in results["mitmdump"])
    lines = [f"{'':24} {'port':>8} {'/health':>8} {'answer':>8} {'CPU':>8}  (least of runs)"]
    for name, starts in results.items():
        port = min(s.port for s in starts)
        health = min((s.health for s in starts if s.health), default=0.0)
        answer = min((s.answer for s in starts if s.answer), default=0.0)
        cpu = min(s.cpu for s in starts)
        ratio = f"answer {answer / reference:.2f}x mitmdump -S" if answer else ""
        lines.append(
            f"{name:24} {port:7.3f}s {health:7.3f}s {answer:7.3f}s {cpu:7.3f}s  "
            f"port {port / bare_port:.2f}x mitmdump; {ratio}"
        )
    return lines
