"""Replicas: record throughput with 1, 2 and 3 proxy processes on one PostgreSQL store.

    .venv/bin/python tests/benchmarks/bench_replicas.py
    .venv/bin/python tests/benchmarks/bench_replicas.py --replicas 1 2 3 --clients 8 --requests 40

For each replica count R, a fresh PostgreSQL database (127.0.0.1:5432, trust auth) and R
``freezeframe run --mode record`` processes recording one cassette into it; ``--clients``
client threads in all, spread over the replicas, each sending ``--requests`` chat
completions whose bodies are all different (tests/support/agent_traffic.py) to the local
upstream (tests/support/upstream.py). Reported per R: requests/s over the wall time, the
ratio to one replica, p50/p99 latency, and what a user checks afterwards: the cassette holds
every answered request once, its seqs have no gap, and its chain verifies.

On a machine with two cores the replicas, the clients, the upstream and PostgreSQL share
them, so more replicas cannot mean more throughput here; the run shows what replicas cost
(coordination through the database) and that nothing is lost. On a larger machine the same
script shows the scaling.

A script, not a test: it exits 1 only if an exchange was lost, duplicated or the chain broke.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import ssl
import statistics
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

from support.agent_traffic import prose  # noqa: E402
from support.proxy import ProxyProcess  # noqa: E402
from support.upstream import Upstream  # noqa: E402

from freezeframe.storage import open_store  # noqa: E402

SERVER = "postgresql://postgres@127.0.0.1:5432"
CASSETTE = "shared"


def body(client: int, n: int) -> dict[str, object]:
    rng = random.Random(client * 100_003 + n)
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": prose(rng, 200)},
            {"role": "user", "content": prose(rng, 80)},
        ],
    }


def drive(proxy: ProxyProcess, url: str, client: int, count: int, latencies: list[float]) -> None:
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    with httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=60) as http:
        for n in range(count):
            started = time.perf_counter()
            http.post(url, json=body(client, n)).raise_for_status()
            latencies.append(time.perf_counter() - started)


def one_run(replicas: int, clients: int, requests: int, upstream: Upstream, ca: Path) -> dict:
    name = f"ff_bench_{secrets.token_hex(4)}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    store = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    proxies: list[ProxyProcess] = []
    try:
        with tempfile.TemporaryDirectory(prefix="freezeframe-replicas-") as tmp:
            for n in range(replicas):
                proxy = ProxyProcess(
                    Path(tmp) / f"r{n}",
                    mode="record",
                    cassette=CASSETTE,
                    upstream_ca=ca,
                    store=store,
                )
                proxies.append(proxy.start())
            url = f"{upstream.base_url}/v1/chat/completions"
            latencies: list[float] = []
            threads = [
                threading.Thread(
                    target=drive,
                    args=(proxies[c % replicas], url, c, requests, latencies),
                    daemon=True,
                )
                for c in range(clients)
            ]
            began = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(600)
            wall = time.perf_counter() - began
            for proxy in proxies:
                proxy.stop()
        with open_store(store, create=False) as opened:
            seqs = [row.seq for row in opened.exchanges(CASSETTE)]
            verified = opened.verify(CASSETTE).ok
    finally:
        for proxy in proxies:
            proxy.kill()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    ordered = sorted(latencies)
    return {
        "replicas": replicas,
        "answered": len(latencies),
        "stored": len(seqs),
        "gapless": seqs == list(range(len(seqs))),
        "verified": verified,
        "rps": len(latencies) / wall,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[int(0.99 * (len(ordered) - 1))] * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ca = trustme.CA()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = Path(tmp) / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        upstream = Upstream(ca).start()
        try:
            print(
                f"{'replicas':>8} {'answered':>9} {'stored':>7} {'gapless':>8} {'verifies':>9} "
                f"{'req/s':>7} {'x 1 replica':>11} {'p50 ms':>8} {'p99 ms':>8}"
            )
            for replicas in args.replicas:
                result = one_run(replicas, args.clients, args.requests, upstream, ca_file)
                results.append(result)
                ratio = result["rps"] / results[0]["rps"]
                print(
                    f"{replicas:>8} {result['answered']:>9} {result['stored']:>7} "
                    f"{str(result['gapless']):>8} {str(result['verified']):>9} "
                    f"{result['rps']:>7.1f} {ratio:>10.2f}x {result['p50_ms']:>8.1f} "
                    f"{result['p99_ms']:>8.1f}",
                    flush=True,
                )
        finally:
            upstream.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    whole = all(r["answered"] == r["stored"] and r["gapless"] and r["verified"] for r in results)
    return 0 if whole else 1


if __name__ == "__main__":
    raise SystemExit(main())
