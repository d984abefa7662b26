"""The store goes away and comes back: recording keeps forwarding, replay answers 503, and
both carry on by themselves once the store answers again; /health says which."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from storage import open_store

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


@contextmanager
def store_away(postgres_url: str) -> Iterator[None]:
    """The database refuses every connection, and those open are dropped, until the end."""
    from conftest import pg_admin

    name = postgres_url.rsplit("/", 1)[1]
    with pg_admin() as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'freezeframe'",
            (name,),
        )
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
            health = proxy.admin("GET", "/health").json()
            assert health["status"] == "degraded" and health["store_problem"]
        assert client.get(url, params={"n": "after"}).status_code == 200
    assert proxy.admin("GET", "/health").json()["store_problem"] is None
    proxy.stop()
    assert "could not store exchange" in proxy.log
    with open_store(postgres_url) as store:
        kept = [store.exchange("outage", r.seq).path for r in store.exchanges("outage")]
    assert kept == ["/tool/counter?n=before", "/tool/counter?n=after"]


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
    with httpx.Client(timeout=30) as client:
        assert client.get(url, params={"n": 0}).json() == recorded[0]
        with store_away(postgres_url):
            away = client.get(url, params={"n": 1})
            assert away.status_code == 503
            assert away.json()["error"]["type"] == "freezeframe_store_unavailable"
        assert client.get(url, params={"n": 1}).json() == recorded[1]
    assert upstream.connections == 1, "replay never forwarded"
