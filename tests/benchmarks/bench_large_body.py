"""Peak memory of the proxy while a large body passes: bare mitmdump vs freezeframe.

    .venv/bin/python tests/benchmarks/bench_large_body.py [--size-mb 500]

Downloads ``--size-mb`` of pseudo-random bytes (they do not compress away) through each
proxy, sampling the proxy process's resident memory every 10 ms: bare ``mitmdump``
(which buffers the body unless ``stream_large_bodies`` is set), ``mitmdump`` with
streaming, freezeframe ``record``, and freezeframe ``replay`` (which opens no upstream
connection).
Reports peak RSS, growth over the idle proxy, wall time and throughput, and the resident
memory over time (the highest sample of each tenth of the run, which for ``record`` lasts
until the store lists the exchange: the writer copies a large body in after the client has
it), which is what says whether memory stays flat. After ``record`` it reads the stored
exchange's listing (outcome, status and bytes, without loading the body) to show it was
recorded with the outcome the client saw. The issue's target: freezeframe under 150 MB RSS
for a 500 MB body.

    .venv/bin/python tests/benchmarks/bench_large_body.py --size-mb 10240 --only record

``--only`` runs a subset (``mitmdump``, ``streaming``, ``record``, ``replay``; comma-separated):
a 10 GB body through bare mitmdump would need 10 GB of memory. A script, not a test; nothing
is asserted.
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
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from freezeframe.storage import open_store  # noqa: E402

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
    """The body's digest and length (as ``blake3:length``), and the seconds it took."""
    digest = blake3.blake3()
    received = 0
    start = time.monotonic()
    with httpx.Client(proxy=proxy, verify=trust, trust_env=False, timeout=600) as client:
        with client.stream("GET", url) as response:
            response.raise_for_status()
            for piece in response.iter_raw():
                digest.update(piece)
                received += len(piece)
    return f"{digest.hexdigest()}:{received}", time.monotonic() - start


def measure(
    pid: int, action: Callable[[], tuple[str, float]], then: Callable[[], float] | None = None
) -> dict[str, object]:
    """Sample the proxy's memory while ``action`` runs, and ``then`` after it (the wait
    for the body to be stored): the writer copies a huge body into the store after the
    client has it, and memory must stay flat through that too."""
    proc = psutil.Process(pid)
    idle = proc.memory_info().rss
    peak = [idle]
    samples: list[tuple[float, int]] = []
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        while not done.wait(0.01):
            try:
                rss = proc.memory_info().rss
            except psutil.Error:
                return
            peak[0] = max(peak[0], rss)
            samples.append((time.monotonic() - start, rss))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    stored_after = None
    try:
        digest, seconds = action()
        if then is not None:
            stored_after = then()
    finally:
        done.set()
        watcher.join(5)
    span = time.monotonic() - start
    mb = 1024 * 1024
    tenths = [0] * 10
    for at, rss in samples:
        slot = min(9, int(10 * at / span)) if span else 0
        tenths[slot] = max(tenths[slot], rss)
    return {
        "digest": digest,
        "seconds": seconds,
        "idle_mb": idle / mb,
        "peak_mb": peak[0] / mb,
        "growth_mb": (peak[0] - idle) / mb,
        "peak_by_tenth_mb": [round(rss / mb) for rss in tenths],
        "stored_after_s": stored_after,
    }


def wait_stored(data: Path, timeout: float = 1800.0) -> float:
    """Seconds from the download's end until the store lists the exchange."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if stored_outcome(data)["exchanges"]:
            return time.monotonic() - start
        time.sleep(1.0)
    raise RuntimeError(f"the exchange was not stored within {timeout:.0f} s")


def stored_outcome(data: Path) -> dict[str, object]:
    """The recorded exchange's listing line: outcome, status and bytes, no body read."""
    with open_store(f"sqlite:///{data / 'freezeframe.db'}", create=False) as store:
        rows = [row for name in store.cassette_names() for row in store.exchanges(name)]
    return {
        "exchanges": len(rows),
        "outcome": [row.outcome.value for row in rows],
        "status": [row.status for row in rows],
        "response_bytes": [row.response_bytes for row in rows],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--only", default="mitmdump,streaming,record,replay")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    size = args.size_mb * 1024 * 1024
    only = set(args.only.split(","))
    results: dict[str, dict[str, object]] = {}
    stored: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with upstream(work) as (up_port, up_ca):
            url = f"https://localhost:{up_port}/bytes/random?size={size}&seed=1"
            mitm_conf = work / "mitm"
            data = work / "ff"
            for name, stream in (("mitmdump", False), ("mitmdump streaming", True)):
                if ("streaming" if stream else "mitmdump") not in only:
                    continue
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
                if mode not in only:
                    continue
                port, admin = free_port(), free_port()
                command = [
                    sys.executable,
                    "-P",
                    "-m",
                    "freezeframe",
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
                        child.pid,
                        partial(download, url, f"http://127.0.0.1:{port}", trust),
                        partial(wait_stored, data) if mode == "record" else None,
                    )
                if mode == "record":
                    stored = stored_outcome(data)
        digests = {r["digest"] for r in results.values()}
    same = len(digests) == 1
    print(f"{args.size_mb} MB body, pseudo-random; all clients got the same bytes: {same}")
    print(f"received (digest:bytes): {sorted(digests)}")
    print(
        f"{'proxy':22} {'idle MB':>8} {'peak MB':>8} {'growth MB':>10} {'seconds':>8} {'MB/s':>6}"
    )
    for name, r in results.items():
        mb = f"{r['idle_mb']:8.0f} {r['peak_mb']:8.0f} {r['growth_mb']:10.0f}"
        received = int(str(r["digest"]).rpartition(":")[2]) / (1024 * 1024)
        rate = received / float(r["seconds"])  # type: ignore[arg-type]
        print(f"{name:22} {mb} {r['seconds']:8.1f} {rate:6.0f}")
        print(f"{'':22} peak MB by tenth of the run: {r['peak_by_tenth_mb']}")
        if r["stored_after_s"] is not None:
            print(f"{'':22} stored {r['stored_after_s']:.1f} s after the client had it all")
    if stored:
        print(f"stored by record: {stored}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "stored": stored}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
