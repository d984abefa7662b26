"""Where recording's CPU goes: the proxy's process against its store writer's (issue #25).

    .venv/bin/python tests/benchmarks/bench_writer.py              # 2 rounds
    .venv/bin/python tests/benchmarks/bench_writer.py --rounds 4

Each round starts ``freezeframe run --mode record`` twice, once with ``--store-writer thread``
and once with ``--store-writer process`` (alternating which goes first), and sends the same
load through each: 16 clients at once, each 25 chat-completion POSTs (a conversation of 6 to
30 KB that grows and starts again). It prints, per run, requests/s, p50 latency, and the CPU
per request of the proxy's own process and of its child processes (the writer process), so
that what moved off the proxy's process, and what it costs in all, can be read apart.
Unpinned: the writer process may take the other core, as it would in production.

A script, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
import trustme

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from support.proxy import ProxyProcess  # noqa: E402
from support.upstream import Upstream  # noqa: E402

CLIENTS = 16
PER_CLIENT = 25
TURNS = 12


def conversation(client: int, turn: int) -> bytes:
    """A chat completion request ``turn`` turns into a conversation; every body different."""
    messages = [{"role": "system", "content": "You are a careful agent. " * 200}]
    for n in range(turn):
        messages.append({"role": "user", "content": f"turn {n} " + secrets.token_hex(200)})
        messages.append({"role": "assistant", "content": "ok " * 50})
    return json.dumps({"model": "gpt-4o", "messages": messages, "user": str(client)}).encode()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def one_run(writer: str, ca: Path, upstream: Upstream, work: Path) -> dict[str, object]:
    proxy = ProxyProcess(
        work / f"data-{writer}-{secrets.token_hex(3)}",
        mode="record",
        cassette="bench",
        upstream_ca=ca,
        args=("--store-writer", writer),
    ).start()
    try:
        assert proxy.process is not None
        main = psutil.Process(proxy.process.pid)
        children = main.children(recursive=True)
        trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
        url = f"{upstream.base_url}/v1/chat/completions"
        latencies: list[float] = []
        failures: list[int] = []

        def client(number: int) -> None:
            headers = {"content-type": "application/json"}
            with httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=60) as h:
                h.post(url, content=conversation(number, 0), headers=headers)  # connected
                for n in range(PER_CLIENT):
                    began = time.perf_counter()
                    answer = h.post(url, content=conversation(number, n % TURNS), headers=headers)
                    latencies.append(time.perf_counter() - began)
                    if answer.status_code != 200:
                        failures.append(answer.status_code)

        proxy_before = cpu_seconds(main)
        writer_before = sum(cpu_seconds(child) for child in children)
        began = time.perf_counter()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        wall = time.perf_counter() - began
        time.sleep(1.0)  # the writer commits what the last answers left
        requests = CLIENTS * PER_CLIENT
        return {
            "writer": writer,
            "requests_per_s": round(requests / wall, 1),
            "p50_ms": round(statistics.median(latencies) * 1000, 1),
            "proxy_cpu_ms_per_req": round((cpu_seconds(main) - proxy_before) * 1000 / requests, 2),
            "writer_process_cpu_ms_per_req": round(
                (sum(cpu_seconds(child) for child in children) - writer_before) * 1000 / requests,
                2,
            ),
            "failures": len(failures),
            "load_average": round(os.getloadavg()[0], 1),
        }
    finally:
        proxy.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    ca = trustme.CA()
    with tempfile.TemporaryDirectory(prefix="freezeframe-writer-") as tmp:
        work = Path(tmp)
        ca_file = work / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        upstream = Upstream(ca).start()
        try:
            for round_no in range(args.rounds):
                order = ("thread", "process") if round_no % 2 == 0 else ("process", "thread")
                for writer in order:
                    print(json.dumps(one_run(writer, ca_file, upstream, work)), flush=True)
        finally:
            upstream.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
