"""Modes, cassettes, odd input, streaming and the admin API, through the real proxy."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def stored(proxy: ProxyProcess, cassette: str = "default") -> list[str]:
    with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}") as store:
        if not store.has_cassette(cassette):
            return []
        return [row.url for row in store.exchanges(cassette)]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b'{"model": "gpt", "messages": [oops'),
        ("application/json", b"\xff\xfe not utf-8 \xc3\x28"),
        ("application/json", b""),
        ("text/plain; charset=weird", b"plain text body"),
    ],
    ids=["invalid-json", "invalid-utf8", "empty", "odd-content-type"],
)
def test_odd_bodies_are_forwarded_recorded_and_replayed_untouched(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    content_type: str,
    body: bytes,
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    headers = {"Content-Type": content_type, "X-Odd-But-Legal": 'a;;b,,  c=""  d'}
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = httpx.post(url, content=body, headers=headers)
    assert upstream.requests[-1].body == body
    assert upstream.requests[-1].header("x-odd-but-legal") == headers["X-Odd-But-Legal"]
    recorder.stop()
    if body.startswith(b'{"model"'):
        assert "not valid JSON" in recorder.log

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed = httpx.post(url, content=body, headers=headers)
    assert replayed.content == recorded.content


def test_cassette_header_routes_requests_and_is_never_forwarded(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    proxy = start_proxy(mode="record", cassette="main")
    client_env(proxy)
    httpx.get(url, headers={"X-Freezeframe-Cassette": "agent-a"})
    httpx.get(url, headers={"X-Freezeframe-Cassette": "agent-b"})
    httpx.get(url)
    assert all(r.header("x-freezeframe-cassette") is None for r in upstream.requests)
    bad = httpx.get(url, headers={"X-Freezeframe-Cassette": "../etc/passwd"})
    assert bad.status_code == 400
    assert "invalid cassette name" in bad.json()["error"]["message"]
    assert len(upstream.requests) == 3
    proxy.stop()
    assert [len(stored(proxy, c)) for c in ("agent-a", "agent-b", "main")] == [1, 1, 1]


def test_unknown_cassette_in_replay_says_so(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="replay", cassette="never-recorded")
    client_env(proxy)
    miss = httpx.get(f"{upstream.base_url}/tool/counter")
    assert miss.status_code == 404
    assert miss.headers["x-should-retry"] == "false"
    assert "cassette 'never-recorded' does not exist" in miss.json()["error"]["message"]
    assert upstream.connections == 0


def test_auto_replays_what_it_has_and_records_what_it_lacks(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    assert httpx.get(url).json()["count"] == 1
    recorder.stop()

    auto = start_proxy(mode="auto")
    client_env(auto)
    assert httpx.get(url).json()["count"] == 1, "replayed"
    assert httpx.get(url).json()["count"] == 2, "forwarded and recorded"
    auto.stop()
    assert len(stored(auto)) == 2

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert [httpx.get(url).json()["count"] for _ in range(2)] == [1, 2]


def test_passthrough_forwards_and_stores_nothing(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="passthrough")
    client_env(proxy)
    assert httpx.get(f"{upstream.base_url}/tool/counter").json()["count"] == 1
    proxy.stop()
    assert stored(proxy) == []


def test_a_stream_reaches_the_client_as_it_arrives_while_being_recorded(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record")
    client_env(proxy)
    arrivals: list[float] = []
    url = f"{upstream.base_url}/sse/slow?events=5&gap_ms=300"
    start = time.monotonic()
    with httpx.stream("GET", url, timeout=30) as response:
        for _ in response.iter_raw():
            arrivals.append(time.monotonic() - start)
    proxy.stop()
    assert len(arrivals) >= 5, "the stream was delivered in one piece"
    assert arrivals[-1] - arrivals[0] > 0.9, "the proxy buffered the stream"
    with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}") as store:
        response = store.exchange("default", 0).recorded.response
    assert response is not None
    assert len(response.chunks) == 5
    assert response.body.count(b"data: ") == 5


def test_admin_api_reports_health_serves_the_ca_and_switches_mode(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record", cassette="first")
    client_env(proxy)
    health = proxy.admin("GET", "/health").json()
    assert health | {"version": "-", "store": "-"} == {
        "status": "ok",
        "mode": "record",
        "cassette": "first",
        "pace": "recorded",
        "proxy": f"127.0.0.1:{proxy.port}",
        "admin": f"127.0.0.1:{proxy.admin_port}",
        "reverse": [],
        "data_dir": str(proxy.data_dir.absolute()),
        "ca": str(proxy.ca_path.absolute()),
        "ca_bundle": str((proxy.data_dir / "ca-bundle.pem").absolute()),
        "store": "-",
        "version": "-",
        "store_problem": None,
        "tally": {
            "recorded": 0,
            "recorded_by_outcome": {},
            "replayed": 0,
            "missed": 0,
            "drifted": 0,
        },
    }
    assert health["store"] == f"sqlite:///{(proxy.data_dir / 'freezeframe.db').absolute()}"
    assert proxy.admin("GET", "/ca.pem").content == proxy.ca_path.read_bytes()

    url = f"{upstream.base_url}/tool/counter"
    recorded = httpx.get(url).json()
    switched = proxy.admin("PUT", "/api/mode", json={"mode": "replay"})
    assert switched.json() == {"mode": "replay", "cassette": "first", "pace": "recorded"}
    connections = upstream.connections
    assert httpx.get(url).json() == recorded
    assert upstream.connections == connections

    listed = proxy.admin("GET", "/api/cassettes/first").json()
    assert [(row["seq"], row["status"], row["outcome"]) for row in listed] == [(0, 200, "complete")]
    assert proxy.admin("GET", "/api/cassettes/first?status=complete").json() == listed
    assert proxy.admin("GET", "/api/cassettes/first?status=429").json() == []
    assert [c["name"] for c in proxy.admin("GET", "/api/cassettes?status=200").json()] == ["first"]
    assert proxy.admin("GET", "/api/cassettes?run_id=nobody").json() == []
    bad = proxy.admin("GET", "/api/cassettes/first?status=teapot")
    assert bad.status_code == 400 and "'teapot'" in bad.json()["error"]
    assert proxy.admin("GET", "/api/cassettes/nowhere").status_code == 404

    assert proxy.admin("PUT", "/api/mode", json={"mode": "rewind"}).status_code == 400
    assert proxy.admin("PUT", "/api/mode", json={"cassette": "a/b"}).status_code == 400
    assert proxy.admin("GET", "/api/mode").json()["mode"] == "replay"
    proxy.admin("PUT", "/api/mode", json={"mode": "record", "cassette": "second"})
    httpx.get(url)
    proxy.stop()
    assert (len(stored(proxy, "first")), len(stored(proxy, "second"))) == (1, 1)


@pytest.mark.postgres
def test_record_and_replay_with_a_postgresql_store(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    recorder = start_proxy(mode="record", store=postgres_url)
    client_env(recorder)
    recorded = [httpx.get(url).json() for _ in range(2)]
    recorder.stop()
    assert not (recorder.data_dir / "freezeframe.db").exists()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay", store=postgres_url, data_dir=tmp_path / "other")
    client_env(replayer)
    assert [httpx.get(url).json() for _ in range(2)] == recorded
    assert upstream.connections == 0
