"""kill -9 while recording, again and again: what a crash can lose, and what it never damages.

    .venv/bin/python tests/benchmarks/bench_kill.py                          # 100 kills, SQLite
    .venv/bin/python tests/benchmarks/bench_kill.py --kills 30 --store postgresql
    .venv/bin/python tests/benchmarks/bench_kill.py --durability strict

Each round starts ``freezeframe run --mode record`` on the same store, lets ``--clients``
threads stream SSE answers through it (every request its own, 20 events 5 ms apart), and
kills the proxy with SIGKILL at a random moment (1 to 3 s in). Then, with the proxy
dead, it opens the store and checks:

* the store opens (``opens``) and ``verify`` passes on the cassette (``verifies``);
* every exchange stored reads back, and a stored stream that claims to be complete has all
  its events (``damaged``: 0 is the promise);
* of the streams a client received whole (all events and the end of the answer), how many
  are not in the store (``lost``, and ``most_lost_by_one_kill``): the durability window.
  Under ``--durability strict`` the end of an answer reaches the client only once it is
  committed, so ``lost`` must be 0.

A script, not a test: it exits 1 if the store ever failed to open or verify, an exchange
was damaged, or a strict run lost a stream.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import ssl
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

from freezeframe.storage import StoreError, open_store  # noqa: E402

SERVER = "postgresql://postgres@127.0.0.1:5432"
CASSETTE = "crash"
EVENTS = 20


def stream(proxy: ProxyProcess, base: str, tag: str, stop: threading.Event, whole: list) -> None:
    """Stream answers one after another until the proxy dies; note each received whole."""
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    with httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=10) as http:
        n = 0
        while not stop.is_set():
            url = f"{base}/sse/slow?events={EVENTS}&gap_ms=5&tag={tag}-{n}"
            try:
                with http.stream("GET", url) as response:
                    body = b"".join(response.iter_raw())
            except httpx.HTTPError:
                return
            if body.count(b"data: ") == EVENTS:
                whole.append(f"{tag}-{n}")
            n += 1


def one_round(
    round_no: int,
    store: str,
    upstream: Upstream,
    ca: Path,
    args: argparse.Namespace,
    stored: set[str],
    checked: set[int],
) -> dict[str, object]:
    """One kill, then the checks. ``stored`` (tags of complete streams) and ``checked`` (seqs
    read back) carry over between rounds, so each round reads back only the exchanges new
    since the last; ``verify`` still walks the whole cassette every time."""
    with tempfile.TemporaryDirectory(prefix="freezeframe-kill-") as tmp:
        proxy = ProxyProcess(
            Path(tmp) / "data",
            mode="record",
            cassette=CASSETTE,
            upstream_ca=ca,
            store=store,
            args=("--durability", args.durability),
        ).start()
        stop = threading.Event()
        whole: list[str] = []
        threads = [
            threading.Thread(
                target=stream,
                args=(proxy, upstream.base_url, f"r{round_no}c{c}", stop, whole),
                daemon=True,
            )
            for c in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        time.sleep(random.uniform(1.0, 3.0))
        proxy.kill()
        stop.set()
        for thread in threads:
            thread.join(30)
    result: dict[str, object] = {"received": len(whole)}
    try:
        with open_store(store, create=False) as opened:
            result["opens"] = True
            recorded = opened.has_cassette(CASSETTE)
            result["verifies"] = opened.verify(CASSETTE).ok if recorded else True
            damaged = 0
            for row in opened.exchanges(CASSETTE) if recorded else []:
                if row.seq in checked:
                    continue
                checked.add(row.seq)
                exchange = opened.exchange(CASSETTE, row.seq)
                tag = exchange.recorded.path.partition("tag=")[2]
                response = exchange.recorded.response
                complete = exchange.recorded.outcome.value == "complete"
                if complete and (response is None or response.body.count(b"data: ") != EVENTS):
                    damaged += 1
                if complete:
                    stored.add(tag)
            result["damaged"] = damaged
            result["lost"] = len(set(whole) - stored)
    except StoreError as exc:
        result |= {"opens": False, "verifies": False, "error": str(exc)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--durability", choices=["batched", "strict"], default="batched")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    ca = trustme.CA()
    database = None
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = Path(tmp) / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        if args.store == "postgresql":
            database = f"ff_kill_{secrets.token_hex(4)}"
            with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {database}")
            store = f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
        else:
            store = f"sqlite:///{Path(tmp) / 'crash.db'}"
        upstream = Upstream(ca).start()
        stored: set[str] = set()
        checked: set[int] = set()
        try:
            for n in range(args.kills):
                rounds.append(one_round(n, store, upstream, ca_file, args, stored, checked))
                if (n + 1) % 10 == 0:
                    print(f"[bench] {n + 1} kills", file=sys.stderr, flush=True)
        finally:
            upstream.stop()
            if database is not None:
                with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    summary = {
        "store": args.store,
        "durability": args.durability,
        "kills": len(rounds),
        "opens": sum(bool(r.get("opens")) for r in rounds),
        "verifies": sum(bool(r.get("verifies")) for r in rounds),
        "damaged": sum(int(r.get("damaged", 0)) for r in rounds),  # type: ignore[call-overload]
        "received_whole": sum(int(r["received"]) for r in rounds),  # type: ignore[call-overload]
        "lost": sum(int(r.get("lost", 0)) for r in rounds),  # type: ignore[call-overload]
        "most_lost_by_one_kill": max((int(r.get("lost", 0)) for r in rounds), default=0),  # type: ignore[call-overload]
        "kills_that_lost_any": sum(bool(r.get("lost")) for r in rounds),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rounds": rounds}, indent=2))
    broken = (
        summary["opens"] != summary["kills"]
        or summary["verifies"] != summary["kills"]
        or summary["damaged"]
        or (args.durability == "strict" and summary["lost"])
    )
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
