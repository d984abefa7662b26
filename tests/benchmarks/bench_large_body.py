"""Peak memory of the proxy while a large body passes: bare mitmdump vs freezeframe.

    .venv/bin/python tests/benchmarks/bench_large_body.py [--size-mb 500]

Downloads ``--size-mb`` of pseudo-random bytes (they do not compress away) through each
proxy, sampling the proxy process's resident memory every 10 ms: bare ``mitmdump``
(which buffers the body unless ``stream_large_bodies`` is set), ``mitmdump`` with
streaming, freezeframe ``record``, and freezeframe ``replay`` (which opens no upstream
connection).
Reports peak RSS, growth over the idle proxy, and wall time. The issue's target: freezeframe
under 150 MB RSS for a 500 MB body. A script, not a test; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import blake3
import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        child = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
    try:
        yield child
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(10)


@contextmanager
def upstream(workdir: Path) -> Iterator[tuple[int, Path]]:
    ca = workdir / "upstream-ca.pem"
    command = [
        sys.executable,
        str(ROOT / "tests/benchmarks/upstream_server.py"),
        "--ca-out",
        str(ca),
        "--max-seconds",
        "900",
    ]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    try:
        assert child.stdout is not None
        port = int(json.loads(child.stdout.readline())["port"])
        yield port, ca
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(20)


def wait_listening(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"proxy exited with {child.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("proxy did not start")


def download(url: str, proxy: str, trust: ssl.SSLContext) -> tuple[str, float]:
    digest = blake3.blake3()
    start = time.monotonic()
    with httpx.Client(proxy=proxy, verify=trust, trust_env=False, timeout=600) as client:
        with client.stream("GET", url) as response:
            response.raise_for_status()
            for piece in response.iter_raw():
                digest.update(piece)
    return digest.hexdigest(), time.monotonic() - start


def measure(pid: int, action: Callable[[], tuple[str, float]]) -> dict[str, float | str]:
    proc = psutil.Process(pid)
    idle = proc.memory_info().rss
    peak = [idle]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.01):
            try:
                peak[0] = max(peak[0], proc.memory_info().rss)
            except psutil.Error:
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        digest, seconds = action()
    finally:
        done.set()
        watcher.join(5)
    mb = 1024 * 1024
    return {
        "digest": digest,
        "seconds": seconds,
        "idle_mb": idle / mb,
        "peak_mb": peak[0] / mb,
        "growth_mb": (peak[0] - idle) / mb,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    size = args.size_mb * 1024 * 1024
    results: dict[str, dict[str, float | str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with upstream(work) as (up_port, up_ca):
            url = f"https://localhost:{up_port}/bytes/random?size={size}&seed=1"
            mitm_conf = work / "mitm"
            data = work / "ff"
            for name, stream in (("mitmdump", False), ("mitmdump streaming", True)):
                port = free_port()
                command = [
                    str(VENV_BIN / "mitmdump"),
                    "-q",
                    "--listen-host",
                    "127.0.0.1",
                    "--listen-port",
                    str(port),
                    "--set",
                    f"confdir={mitm_conf}",
                    "--set",
                    f"ssl_verify_upstream_trusted_ca={up_ca}",
                ]
                if stream:
                    command += ["--set", "stream_large_bodies=1m"]
                with process(command, work / f"{name}.log") as child:
                    wait_listening(port, child)
                    trust = ssl.create_default_context(
                        cafile=str(mitm_conf / "mitmproxy-ca-cert.pem")
                    )
                    results[name] = measure(
                        child.pid, partial(download, url, f"http://127.0.0.1:{port}", trust)
                    )
            for mode in ("record", "replay"):
                port, admin = free_port(), free_port()
                command = [
                    sys.executable,
                    "-m",
                    "cli",
                    "run",
                    "--mode",
                    mode,
                    "--data-dir",
                    str(data),
                    "--upstream-ca",
                    str(up_ca),
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--admin",
                    f"127.0.0.1:{admin}",
                ]
                with process(command, work / f"ff-{mode}.log") as child:
                    wait_listening(port, child)
                    trust = ssl.create_default_context(cafile=str(data / "mitmproxy-ca-cert.pem"))
                    results[f"freezeframe {mode}"] = measure(
                        child.pid, partial(download, url, f"http://127.0.0.1:{port}", trust)
                    )
        digests = {r["digest"] for r in results.values()}
    same = len(digests) == 1
    print(f"{args.size_mb} MB body, pseudo-random; all clients got the same bytes: {same}")
    print(f"{'proxy':22} {'idle MB':>8} {'peak MB':>8} {'growth MB':>10} {'seconds':>8}")
    for name, r in results.items():
        mb = f"{r['idle_mb']:8.0f} {r['peak_mb']:8.0f} {r['growth_mb']:10.0f}"
        print(f"{name:22} {mb} {r['seconds']:8.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
