"""A big store: replay start-up, lookups, ``ls`` and a run's listing as the store grows.

    .venv/bin/python tests/benchmarks/bench_scale.py                       # 1,000 and 20,000
    .venv/bin/python tests/benchmarks/bench_scale.py --sizes 1000 1000000  # a long while
    .venv/bin/python tests/benchmarks/bench_scale.py --sizes 20000 --mitmdump
    .venv/bin/python tests/benchmarks/bench_scale.py --sizes 1000000 --keep /var/tmp/scale

With ``--keep DIR`` each size's store is kept in ``DIR/N`` (``DIR/pg-N`` notes a PostgreSQL
one) and reused by the next run with that size, so a store that took long to fill is filled
once and measured again after a change; its ``ls`` totals are emptied before each measurement.

For each size N, a SQLite store is filled through the store's own API (``submit``) with N
exchanges in runs of 1,000 (one cassette each, every body different), the last run being
the one measured, then:

* ``replay start``: ``freezeframe run --mode replay`` on that store, from the process's
  start until ``/health`` answers, and the proxy's resident memory then (median of three);
  with ``--mitmdump``, ``mitmdump -S`` on a flow file of the same N exchanges, until its port
  accepts (mitmproxy loads every flow before it listens);
* ``lookup``: ``Store.lookup`` of each of the measured run's exchanges, from a store just
  opened (every answer read for the first time), per lookup;
* ``ls``: ``Store.cassettes()``, the listing of every cassette with counts and sizes, the
  first time (every cassette counted) and again (only cassettes that moved are counted);
* ``run view``: ``Store.exchanges(run)``, the rows of one run's waterfall;
* ``run page``: the case file's page of that run (``GET /cassettes/RUN``: the run's figures
  and its first page of rows) from the replaying proxy, the first time and again.

With ``--postgres URL`` the stores are PostgreSQL databases ``freezeframe_scale_N`` on that
server instead (kept, and reused, with ``--keep``).

A script, not a test: it asserts nothing but that every lookup finds its recording.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from support.exchanges import plausible_exchange, plausible_response  # noqa: E402

from freezeframe.storage import NewExchange, Store, open_store  # noqa: E402

RUN = 1_000
START_TIMEOUT = 120.0


def exchange(store: Store, cassette: str, n: int) -> NewExchange:
    """The ``n``-th exchange: a small chat request and answer, both unlike any other."""
    key = f"{n:064x}"
    request = json.dumps({"model": "gpt-4o-mini", "messages": [{"content": f"step {n}"}]})
    answer = json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion"})
    return plausible_exchange(
        store.reserve(cassette, key),
        cassette=cassette,
        key=key,
        request_body=request.encode(),
        started_at=1_700_000_000.0 + n,
        response=plausible_response(body=answer.encode()),
        context={"run-id": cassette},
    )


def fill(url: str, size: int) -> str:
    """N exchanges in runs of RUN; the name of the last run."""
    cassette = ""
    with open_store(url) as store:
        for n in range(size):
            if n % RUN == 0:
                cassette = f"run-{n // RUN:06d}"
            store.submit(exchange(store, cassette, n))
            if n % 5_000 == 4_999:
                store.flush(600)
        store.flush(600)
    return cassette


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def started(
    cmd: list[str], ready: str, port: int, then: Callable[[int], None] | None = None
) -> tuple[float, float]:
    """Seconds from spawning ``cmd`` until ``ready`` (a URL, or "port") answers, and the
    process's resident MB then; ``then`` is called with its pid before it is stopped."""
    log = tempfile.TemporaryFile()
    began = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = began + START_TIMEOUT
        while time.perf_counter() < deadline:
            if child.poll() is not None:
                log.seek(0)
                said = log.read().decode(errors="replace")[-2000:]
                raise SystemExit(f"{cmd[0]} exited with {child.returncode}:\n{said}")
            if _answers(ready, port):
                seconds = time.perf_counter() - began
                rss = psutil.Process(child.pid).memory_info().rss / 2**20
                if then is not None:
                    then(child.pid)
                return seconds, rss
            time.sleep(0.01)
        raise SystemExit(f"{cmd[0]} did not start within {START_TIMEOUT:.0f} s")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        log.close()


def _answers(ready: str, port: int) -> bool:
    if ready == "port":
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", port)) == 0
    try:
        return httpx.get(ready, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def replay_command(data_dir: Path, cassette: str, admin: int, store: str = "") -> list[str]:
    """``freezeframe run --mode replay`` on the store in ``data_dir`` (or ``store``), its
    admin on ``admin``."""
    return [
        *(
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "run",
            "--mode",
            "replay",
            "--cassette",
            cassette,
        ),
        *("--data-dir", str(data_dir), "--listen", f"127.0.0.1:{free_port()}"),
        *("--admin", f"127.0.0.1:{admin}"),
        *(("--store", store) if store else ()),
    ]


def replay_start(data_dir: Path, cassette: str, store: str = "") -> dict[str, float]:
    """The median start of three, and the case file's page of the run (``GET
    /cassettes/RUN``: its figures and its first page of rows) from the first, the first
    time and again."""
    runs = []
    pages: list[float] = []
    for _ in range(3):
        admin = free_port()
        cmd = replay_command(data_dir, cassette, admin, store)

        def run_page(pid: int, url: str = f"http://127.0.0.1:{admin}/cassettes/{cassette}") -> None:
            for _ in range(2):
                began = time.perf_counter()
                httpx.get(url, timeout=600).raise_for_status()
                pages.append((time.perf_counter() - began) * 1000)

        runs.append(started(cmd, f"http://127.0.0.1:{admin}/health", admin, run_page))
    return {
        "replay_start_s": statistics.median(r[0] for r in runs),
        "replay_rss_mb": statistics.median(r[1] for r in runs),
        "run_page_first_ms": pages[0],
        "run_page_ms": statistics.median(pages[1::2]),
    }


def mitmdump_start(tmp: Path, size: int) -> tuple[float, float]:
    from mitmproxy import io as mitm_io
    from mitmproxy.test import tflow

    flows = tmp / "flows"
    with flows.open("wb") as file:
        writer = mitm_io.FlowWriter(file)
        for n in range(size):
            flow = tflow.tflow(resp=True)
            flow.request.content = f'{{"messages": "step {n}"}}'.encode()
            assert flow.response is not None
            flow.response.content = f'{{"id": "chatcmpl-{n}"}}'.encode()
            writer.add(flow)
    port = free_port()
    mitmdump = str(Path(sys.executable).parent / "mitmdump")
    cmd = [mitmdump, "-q", "-p", str(port), "--listen-host", "127.0.0.1", "-S", str(flows)]
    return started(cmd, "port", port)


def filled(data_dir: Path, size: int, postgres: str = "") -> tuple[str, float]:
    """The name of the last run of a store of ``size`` exchanges in ``data_dir`` (or in the
    PostgreSQL database ``postgres``), and the seconds it took to fill (0 when a store filled
    before, and marked so in ``data_dir``, is reused)."""
    done = data_dir / "filled"
    if done.exists():
        return done.read_text(), 0.0
    if postgres:
        _recreate(postgres)
    for stale in data_dir.glob("freezeframe.db*"):
        stale.unlink()
    began = time.perf_counter()
    run = fill(postgres or f"sqlite:///{data_dir / 'freezeframe.db'}", size)
    done.write_text(run)
    return run, time.perf_counter() - began


def _recreate(url: str, drop_only: bool = False) -> None:
    """Drop the PostgreSQL database ``url`` names, and create it empty (unless ``drop_only``)."""
    import psycopg

    server, _, name = url.rpartition("/")
    admin = server.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def _forget_totals(url: str) -> None:
    """Empty the cache of cassette totals ``ls`` keeps, so that a reused store's first
    ``ls`` counts every cassette again, as a new one's does."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM cassette_totals"))
    finally:
        engine.dispose()


def _size_mb(url: str, data_dir: Path) -> float:
    if not url.startswith("postgresql"):
        return (data_dir / "freezeframe.db").stat().st_size / 2**20
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        found = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return float(found[0] if found else 0) / 2**20


def measure(size: int, mitmdump: bool, keep: Path | None, postgres: str = "") -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="freezeframe-scale-") as tmp:
        kind = "pg-" if postgres else ""
        data_dir = Path(tmp) if keep is None else keep / f"{kind}{size}"
        data_dir.mkdir(parents=True, exist_ok=True)
        database = f"{postgres}/freezeframe_scale_{size}" if postgres else ""
        url = database or f"sqlite:///{data_dir / 'freezeframe.db'}"
        run, seconds = filled(data_dir, size, database)
        result: dict[str, float] = {"exchanges": size, "fill_s": seconds}
        with open_store(url, create=False) as store:
            keys = [(e.key, e.occurrence) for e in store.exchanges(run)]
        _forget_totals(url)
        with open_store(url, create=False) as store:
            began = time.perf_counter()
            for key, occurrence in keys:
                if store.lookup(run, key, occurrence) is None:
                    raise SystemExit(f"no recording for {key} in {run}")
            result["lookup_ms"] = (time.perf_counter() - began) / len(keys) * 1000
            began = time.perf_counter()
            listed = store.cassettes()
            result["ls_first_ms"] = (time.perf_counter() - began) * 1000
            began = time.perf_counter()
            store.cassettes()
            result["ls_ms"] = (time.perf_counter() - began) * 1000
            result["cassettes"] = len(listed)
            began = time.perf_counter()
            store.exchanges(run)
            result["run_view_ms"] = (time.perf_counter() - began) * 1000
        result["db_mb"] = _size_mb(url, data_dir)
        result |= replay_start(data_dir, run, database)
        if database and keep is None:
            _recreate(database, drop_only=True)
        if mitmdump:
            result["mitmdump_start_s"], result["mitmdump_rss_mb"] = mitmdump_start(Path(tmp), size)
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 20_000])
    parser.add_argument("--mitmdump", action="store_true", help="also time mitmdump -S")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) each size's store here")
    parser.add_argument(
        "--postgres",
        default="",
        metavar="URL",
        help="measure PostgreSQL stores instead, in databases freezeframe_scale_N on this "
        "server (postgresql+psycopg://USER@HOST:PORT); dropped after unless --keep",
    )
    args = parser.parse_args(argv)
    results = []
    print(os.popen("uptime").read().strip(), flush=True)
    print(
        f"{'exchanges':>10} {'fill s':>7} {'db MB':>7} {'replay start':>12} {'rss MB':>7} "
        f"{'lookup':>9} {'ls first':>9} {'ls':>9} {'run view':>9} {'run page':>16} "
        f"{'mitmdump -S start':>18}"
    )
    for size in args.sizes:
        result = measure(size, args.mitmdump, args.keep, args.postgres)
        results.append(result)
        mitm = (
            f"{result['mitmdump_start_s']:.2f} s {result['mitmdump_rss_mb']:.0f} MB"
            if "mitmdump_start_s" in result
            else "-"
        )
        print(
            f"{size:>10,} {result['fill_s']:>7.0f} {result['db_mb']:>7.1f} "
            f"{result['replay_start_s']:>10.2f} s {result['replay_rss_mb']:>7.0f} "
            f"{result['lookup_ms']:>7.2f}ms {result['ls_first_ms']:>7.1f}ms "
            f"{result['ls_ms']:>7.1f}ms "
            f"{result['run_view_ms']:>7.1f}ms "
            f"{result['run_page_first_ms']:>6.0f}/{result['run_page_ms']:>5.0f}ms {mitm:>18}",
            flush=True,
        )
    print(os.popen("uptime").read().strip())
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
