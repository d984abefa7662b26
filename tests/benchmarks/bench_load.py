"""Load: many agents streaming at once through ``record``, then the same through ``replay``.

    .venv/bin/python tests/benchmarks/bench_load.py                    # 50 agents, 60 s
    .venv/bin/python tests/benchmarks/bench_load.py --agents 20 --seconds 20 --store postgresql

Phase 1, direct: ``--agents`` threads stream SSE answers (12 events 10 ms apart, every
request its own) straight from the local upstream for ``--seconds``; their latencies are the
floor. Phase 2, record: the same through ``freezeframe run --mode record``; every stream an
agent received whole is kept, bytes and all. Phase 3, replay: the upstream is stopped and each
agent sends its recorded requests again, in order, through ``--mode replay --replay-pace
instant``. Reported: streams per phase, p50 and p99 time to the end of a stream and what record
added to them, and what a user checks: every stream received in record replays byte for byte,
the cassette holds each once (no loss, no duplicate), and its chain verifies.

A script, not a test: it exits 1 if a stream was lost, duplicated or replayed differently.
"""

from __future__ import annotations

import argparse
import json
import secrets
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
import trustme

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from support.proxy import ProxyProcess  # noqa: E402
from support.upstream import Upstream  # noqa: E402

from freezeframe.storage import open_store  # noqa: E402

SERVER = "postgresql://postgres@127.0.0.1:5432"
CASSETTE = "load"
EVENTS = 12


def url_of(base: str, agent: int, n: int) -> str:
    return f"{base}/sse/slow?events={EVENTS}&gap_ms=10&agent={agent}&n={n}"


def streamed(http: httpx.Client, url: str) -> tuple[bytes, float] | None:
    """The whole stream and how long it took, or None if it broke."""
    started = time.perf_counter()
    try:
        with http.stream("GET", url) as response:
            body = b"".join(response.iter_raw())
    except httpx.HTTPError:
        return None
    return body, time.perf_counter() - started


def run_agents(count: int, work: Callable[[int], None], seconds: float) -> None:
    threads = [threading.Thread(target=work, args=(a,), daemon=True) for a in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)


def client(proxy: ProxyProcess | None, ca: Path) -> httpx.Client:
    if proxy is None:
        return httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=30)
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    return httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=30)


def live_phase(
    base: str, proxy: ProxyProcess | None, ca: Path, args: argparse.Namespace
) -> tuple[dict[int, list[tuple[int, bytes]]], list[float]]:
    """Each agent streams until time is up: what it received whole, and the latencies."""
    received: dict[int, list[tuple[int, bytes]]] = {a: [] for a in range(args.agents)}
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + args.seconds

    def agent(a: int) -> None:
        with client(proxy, ca) as http:
            n = 0
            while time.perf_counter() < deadline:
                got = streamed(http, url_of(base, a, n))
                if got is not None and got[0].count(b"data: ") == EVENTS:
                    with lock:
                        received[a].append((n, got[0]))
                        latencies.append(got[1])
                n += 1

    run_agents(args.agents, agent, args.seconds)
    return received, latencies


def replay_phase(
    base: str, proxy: ProxyProcess, ca: Path, recorded: dict[int, list[tuple[int, bytes]]]
) -> tuple[int, int]:
    """Each agent sends its recorded requests again: (replayed identically, differed)."""
    same = differ = 0
    lock = threading.Lock()

    def agent(a: int) -> None:
        nonlocal same, differ
        with client(proxy, ca) as http:
            for n, body in recorded[a]:
                got = streamed(http, url_of(base, a, n))
                with lock:
                    if got is not None and got[0] == body:
                        same += 1
                    else:
                        differ += 1

    run_agents(len(recorded), agent, 600)
    return same, differ


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ca = trustme.CA()
    database = None
    with tempfile.TemporaryDirectory(prefix="freezeframe-load-") as tmp:
        ca_file = Path(tmp) / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        if args.store == "postgresql":
            database = f"ff_load_{secrets.token_hex(4)}"
            with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {database}")
            store = f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
        else:
            store = f"sqlite:///{Path(tmp) / 'load.db'}"
        upstream = Upstream(ca).start()
        proxies: list[ProxyProcess] = []
        try:
            base = upstream.base_url
            _, direct = live_phase(base, None, ca_file, args)
            recorder = ProxyProcess(
                Path(tmp) / "record", mode="record", cassette=CASSETTE, upstream_ca=ca_file,
                store=store,
            )  # fmt: skip
            proxies.append(recorder.start())
            recorded, through = live_phase(base, recorder, ca_file, args)
            recorder.stop()
            upstream.stop()
            replayer = ProxyProcess(
                Path(tmp) / "replay", mode="replay", cassette=CASSETTE, store=store,
                args=("--replay-pace", "instant"),
            )  # fmt: skip
            proxies.append(replayer.start())
            same, differ = replay_phase(base, replayer, ca_file, recorded)
            replayer.stop()
            with open_store(store, create=False) as opened:
                rows = opened.exchanges(CASSETTE)
                verified = opened.verify(CASSETTE).ok
            complete = [row for row in rows if row.outcome.value == "complete"]
            stored = {httpx.URL(row.url).raw_path.decode() for row in complete}
        finally:
            for proxy in proxies:
                proxy.kill()
            upstream.stop()
            if database is not None:
                with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    received = sum(len(streams) for streams in recorded.values())
    wanted = {
        httpx.URL(url_of(base, a, n)).raw_path.decode()
        for a, streams in recorded.items()
        for n, _ in streams
    }
    summary = {
        "agents": args.agents,
        "seconds": args.seconds,
        "store": args.store,
        "direct_streams": len(direct),
        "recorded_streams": received,
        "stored_complete": len(complete),
        "duplicates": len(complete) - len(stored),
        "lost": len(wanted - stored),
        "replayed_identical": same,
        "replayed_different": differ,
        "verifies": verified,
        "direct_p50_ms": percentile(direct, 50),
        "direct_p99_ms": percentile(direct, 99),
        "record_p50_ms": percentile(through, 50),
        "record_p99_ms": percentile(through, 99),
        "added_p50_ms": percentile(through, 50) - percentile(direct, 50),
        "added_p99_ms": percentile(through, 99) - percentile(direct, 99),
        "median_stream_ms": statistics.median(through) * 1000,
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    whole = (
        differ == 0
        and summary["duplicates"] == 0
        and summary["lost"] == 0
        and verified
        and same == received
    )
    return 0 if whole else 1


if __name__ == "__main__":
    raise SystemExit(main())
