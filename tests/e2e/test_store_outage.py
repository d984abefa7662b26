"""The store goes away and comes back: recording keeps forwarding, replay answers 503, and
both carry on by themselves once the store answers again; /health says which. The store is
PostgreSQL refusing connections, or a SQLite file whose disk fills up and is freed again."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


@contextmanager
def store_away(postgres_url: str) -> Iterator[None]:
    """The database refuses every connection, and those open are dropped, until the end."""
    from conftest import pg_admin

    name = postgres_url.rsplit("/", 1)[1]
    ours = "FROM pg_stat_activity WHERE datname = %s AND application_name = 'freezeframe'"
    with pg_admin() as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        admin.execute(f"SELECT pg_terminate_backend(pid) {ours}", (name,))
        # pg_terminate_backend only signals: a backend still ending would answer a query.
        deadline = time.monotonic() + 30
        while admin.execute(f"SELECT count(*) {ours}", (name,)).fetchone() != (0,):
            assert time.monotonic() < deadline, "the proxy's connections outlived the outage"
            time.sleep(0.05)
    try:
        yield
    finally:
        with pg_admin() as admin:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")


def stored_before(url: str) -> None:
    """Wait until the writer has committed the exchange recorded before the outage: on a
    busy machine it may still be queued when the store goes away, and then it is lost."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open_store(url) as store:
            if store.has_cassette("outage") and store.exchanges("outage"):
                return
        time.sleep(0.1)
    raise AssertionError("the exchange before the outage was never stored")


@pytest.mark.postgres
def test_recording_forwards_through_an_outage_and_stores_again_after_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    postgres_url: str,
) -> None:
    proxy = start_proxy(mode="record", cassette="outage", store=postgres_url)
    client_env(proxy)
    url = f"{upstream.base_url}/tool/counter"
    with httpx.Client(timeout=30) as client:
        assert client.get(url, params={"n": "before"}).status_code == 200
        stored_before(postgres_url)
        with store_away(postgres_url):
            during = client.get(url, params={"n": "during"})
            assert during.status_code == 200, "the agent never notices"
            # The writer gives "during" up on its own thread, after the answer has gone:
            # the outage lasts until it has, or it would be stored once the store is back.
            assert "could not store exchange" in proxy.logged("could not store exchange")
            health = proxy.admin("GET", "/health").json()
            assert health["status"] == "degraded" and health["store_problem"]
        assert client.get(url, params={"n": "after"}).status_code == 200
    # The writer clears the problem when it next commits, a moment after the answer has
    # gone and after the commit is there to read.
    assert len(proxy.stored("outage", 2, timeout=30)) == 2
    assert proxy.health(lambda health: health["store_problem"] is None)["store_problem"] is None
    proxy.stop()
    with open_store(postgres_url) as store:
        kept = [store.exchange("outage", r.seq).recorded.path for r in store.exchanges("outage")]
    assert kept == ["/tool/counter?n=before", "/tool/counter?n=after"]


@pytest.mark.postgres
def test_replay_answers_503_through_an_outage_and_replays_again_after_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    postgres_url: str,
) -> None:
    recorder = start_proxy(mode="record", cassette="outage", store=postgres_url)
    client_env(recorder)
    url = f"{upstream.base_url}/tool/counter"
    with httpx.Client(timeout=30) as client:
        recorded = [client.get(url, params={"n": n}).json() for n in range(2)]
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="outage", store=postgres_url)
    client_env(replayer)
    other = {"x-freezeframe-cassette": "other"}
    with httpx.Client(timeout=30) as client:
        assert client.get(url, params={"n": 0}).json() == recorded[0]
        with store_away(postgres_url):
            # The replayed cassette was loaded at start (#25): the agent never notices.
            assert client.get(url, params={"n": 1}).json() == recorded[1]
            # A cassette not loaded yet needs the store.
            away = client.get(url, params={"n": 0}, headers=other)
            assert away.status_code == 503
            assert away.json()["error"]["type"] == "freezeframe_store_unavailable"
        assert client.get(url, params={"n": 0}, headers=other).status_code == 404
        replayer.admin("POST", "/api/replay/reset")
        assert client.get(url, params={"n": 1}).json() == recorded[1]
    assert upstream.connections == 1, "replay never forwarded"


SMALL_DISK = 4 * 1024 * 1024


def on_a_small_disk(disk: Path) -> tuple[str, ...]:
    """Run the proxy in a mount namespace of its own where ``disk`` is a 4 MB tmpfs: the
    host's mounts never change, and the disk goes when the proxy does."""
    mount = f'mount -t tmpfs -o size={SMALL_DISK} freezeframe-test "$0" && exec "$@"'
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(disk))


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; return it."""
    filler = disk / "filler"
    with filler.open("wb") as out:
        for _ in range(SMALL_DISK // 65536 + 1):
            try:
                out.write(b"\0" * 65536)
                out.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return filler
    raise AssertionError(f"{disk} never filled up")


@pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs in a mount namespace needs root")
def test_a_sqlite_disk_that_fills_up_forwards_and_stores_again_once_freed(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    tmp_path: Path,
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    store = f"sqlite:///{disk / 'store.db'}"
    proxy = start_proxy(
        mode="record", cassette="outage", store=store, wrapper=on_a_small_disk(disk)
    )
    assert proxy.process is not None
    # The proxy's own view of the disk: its mount namespace, through /proc.
    seen = Path(f"/proc/{proxy.process.pid}/root") / disk.relative_to("/")
    client_env(proxy)
    url = f"{upstream.base_url}/tool/counter"
    with httpx.Client(timeout=30) as client:
        assert client.get(url, params={"n": "before"}).status_code == 200
        assert len(proxy.stored("outage", 1)) == 1
        filler = fill(seen)
        for n in range(3):
            assert client.get(url, params={"n": f"full-{n}"}).status_code == 200
        # The writer gives them up on its own thread, after the answers have gone: the disk
        # stays full until it has, or the last of them would be stored once it is freed.
        assert proxy.logged("could not store exchange", 3).count("could not store exchange") == 3
        health = proxy.admin("GET", "/health").json()
        assert health["status"] == "degraded" and "full" in health["store_problem"]
        filler.unlink()
        assert client.get(url, params={"n": "after"}).status_code == 200
    rows = proxy.stored("outage", 2, timeout=30)
    assert [row["url"].rsplit("?", 1)[1] for row in rows] == ["n=before", "n=after"]
    assert [row["seq"] for row in rows] == [0, 4], "the dropped exchanges' seqs stay unused"
    assert proxy.health(lambda health: health["store_problem"] is None)["store_problem"] is None
    assert proxy.log.count("could not store exchange") == 3
    assert "database or disk is full" in proxy.log
    verified = subprocess.run(
        [
            "nsenter",
            "-t",
            str(proxy.process.pid),
            "-m",
            "--",
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
        ]
        + ["verify", "outage", "--store", store],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
