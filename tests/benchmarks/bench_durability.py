"""What ``--durability strict`` costs against ``batched``: latency per streamed answer, throughput.

    .venv/bin/python tests/benchmarks/bench_durability.py                       # SQLite
    .venv/bin/python tests/benchmarks/bench_durability.py --store postgresql

Two recording proxies run side by side, one ``--durability batched`` and one ``strict``, each
on a store of its own, in front of one local upstream. Phase 1 (latency): one client streams
SSE answers (``--events`` events, no gap) one after another, in blocks of 25 that alternate
between direct (no proxy), batched and strict, so load from elsewhere on the machine hits all
three alike; the time to an answer's last byte is what strict delays (its end waits for the
commit). Phase 2 (throughput): ``--clients`` threads stream through one proxy for
``--seconds``, batched and strict in turn, twice. Reported: p50 and p99 per mode, what each
added to the direct p50, requests/s, and strict's ratios to batched.

A script, not a test: nothing is asserted but that each store holds every answer received.
"""

from __future__ import annotations

import argparse
import json
import secrets
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
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
MODES = ("batched", "strict")
BLOCK = 25


def client(proxy: ProxyProcess | None, ca: Path) -> httpx.Client:
    if proxy is None:
        return httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=30)
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    return httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=30)


def streamed(http: httpx.Client, url: str, events: int) -> float | None:
    """Seconds to the last byte of a whole stream, or None if it broke."""
    started = time.perf_counter()
    try:
        with http.stream("GET", url) as response:
            body = b"".join(response.iter_raw())
    except httpx.HTTPError:
        return None
    took = time.perf_counter() - started
    return took if body.count(b"data: ") == events else None


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


def latency_phase(
    base: str, clients: dict[str, httpx.Client], args: argparse.Namespace
) -> dict[str, list[float]]:
    """Sequential streams, in blocks that take turns between direct, batched and strict."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    counter = 0
    for _ in range(-(-args.requests // BLOCK)):
        for name, http in clients.items():
            for _ in range(BLOCK):
                counter += 1
                url = f"{base}/sse/slow?events={args.events}&gap_ms=0&lat={counter}"
                took = streamed(http, url, args.events)
                if took is not None:
                    times[name].append(took)
    return times


def throughput(base: str, proxy: ProxyProcess, ca: Path, args: argparse.Namespace, tag: str) -> int:
    """Streams received whole by ``--clients`` threads in ``--seconds / 2``."""
    done = [0] * args.clients
    deadline = time.perf_counter() + args.seconds / 2

    def agent(a: int) -> None:
        with client(proxy, ca) as http:
            n = 0
            while time.perf_counter() < deadline:
                url = f"{base}/sse/slow?events={args.events}&gap_ms=0&tp={tag}-{a}-{n}"
                if streamed(http, url, args.events) is not None:
                    done[a] += 1
                n += 1

    threads = [threading.Thread(target=agent, args=(a,), daemon=True) for a in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.seconds + 60)
    return sum(done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="per mode, phase 1")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="per mode, phase 2")
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    ca = trustme.CA()
    databases: list[str] = []
    with tempfile.TemporaryDirectory(prefix="freezeframe-durability-") as tmp:
        ca_file = Path(tmp) / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        stores: dict[str, str] = {}
        for mode in MODES:
            if args.store == "postgresql":
                database = f"ff_durability_{secrets.token_hex(4)}"
                with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                    admin.execute(f"CREATE DATABASE {database}")
                databases.append(database)
                stores[mode] = f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
            else:
                stores[mode] = f"sqlite:///{Path(tmp) / f'{mode}.db'}"
        upstream = Upstream(ca).start()
        proxies: dict[str, ProxyProcess] = {}
        clients: dict[str, httpx.Client] = {}
        try:
            for mode in MODES:
                proxies[mode] = ProxyProcess(
                    Path(tmp) / mode, mode="record", cassette="cost", upstream_ca=ca_file,
                    store=stores[mode], args=("--durability", mode),
                ).start()  # fmt: skip
            base = upstream.base_url
            clients = {"direct": client(None, ca_file)}
            clients |= {mode: client(proxies[mode], ca_file) for mode in MODES}
            for http in clients.values():  # connections and TLS set up before timing
                for n in range(5):
                    streamed(http, f"{base}/sse/slow?events=1&gap_ms=0&warm={n}", 1)
            times = latency_phase(base, clients, args)
            served = {mode: 0 for mode in MODES}
            for round_no in range(2):
                for mode in MODES:
                    served[mode] += throughput(base, proxies[mode], ca_file, args, f"{round_no}")
            for http in clients.values():
                http.close()
            for proxy in proxies.values():
                proxy.stop()
            stored = {}
            for mode in MODES:
                with open_store(stores[mode], create=False) as opened:
                    rows = opened.exchanges("cost")
                    stored[mode] = sum(row.outcome.value == "complete" for row in rows)
        finally:
            for proxy in proxies.values():
                proxy.kill()
            upstream.stop()
            for database in databases:
                with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    direct_p50 = percentile(times["direct"], 50)
    rows: dict[str, dict[str, float]] = {}
    for mode in MODES:
        rows[mode] = {
            "streams": len(times[mode]),
            "p50_ms": round(percentile(times[mode], 50), 2),
            "p99_ms": round(percentile(times[mode], 99), 2),
            "added_p50_ms": round(percentile(times[mode], 50) - direct_p50, 2),
            "requests_per_s": round(served[mode] / args.seconds, 1),
            "stored_complete": stored[mode],
        }
    batched, strict = rows["batched"], rows["strict"]
    summary = {
        "store": args.store,
        "events_per_stream": args.events,
        "clients": args.clients,
        "load_before": load_before,
        "load_after": load_after,
        "direct_p50_ms": round(direct_p50, 2),
        "direct_p99_ms": round(percentile(times["direct"], 99), 2),
        "median_direct_ms": round(statistics.median(times["direct"]) * 1000, 2),
        "modes": rows,
        "strict_vs_batched": {
            "p50": round(strict["p50_ms"] / batched["p50_ms"], 2),
            "p99": round(strict["p99_ms"] / batched["p99_ms"], 2),
            "added_p50_ms": round(strict["p50_ms"] - batched["p50_ms"], 2),
            "requests_per_s": round(strict["requests_per_s"] / batched["requests_per_s"], 2),
        },
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    received = {mode: len(times[mode]) + served[mode] for mode in MODES}
    return 0 if all(stored[mode] >= received[mode] for mode in MODES) else 1


if __name__ == "__main__":
    raise SystemExit(main())
