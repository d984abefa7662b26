"""Replay answers from the cassette it loaded, and reads it again when replay starts over (#25).

A replaying proxy loads a cassette's recordings once and answers from memory. What it did
not load is still found in the store (what ``auto`` records as it goes); what another process
changed is seen once replay starts from the top: ``POST /api/replay/reset`` or
``PUT /api/mode``. Real proxies, httpx through ``HTTPS_PROXY``, the counting upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.settings import default_store_url
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def _record_counter(
    start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv, url: str
) -> int:
    """Record one GET of the counter into cassette ``c``; the count it answered."""
    recorder = start_proxy(mode="record", cassette="c")
    client_env(recorder)
    count = int(httpx.get(url).json()["count"])
    assert recorder.stop() == 0
    return count


@pytest.mark.parametrize(
    "start_over",
    [
        pytest.param(lambda p: p.admin("POST", "/api/replay/reset"), id="replay reset"),
        pytest.param(
            lambda p: p.admin("PUT", "/api/mode", json={"mode": "replay", "cassette": "c"}),
            id="mode switch",
        ),
    ],
)
def test_starting_over_reads_a_cassette_recorded_again_by_another_process(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
    start_over: Callable[[ProxyProcess], httpx.Response],
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    assert _record_counter(start_proxy, client_env, url) == 1
    replayer = start_proxy(mode="replay", cassette="c")
    client_env(replayer)
    assert httpx.get(url).json()["count"] == 1

    # Another process records the cassette again (rm, then record) while replay runs.
    with open_store(default_store_url(data_dir), create=False) as store:
        store.remove("c")
    assert _record_counter(start_proxy, client_env, url) == 2
    client_env(replayer)

    assert start_over(replayer).status_code < 300
    assert httpx.get(url).json()["count"] == 2, "replay must read the cassette again"


def test_auto_mode_replays_what_it_recorded_after_the_load(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    assert _record_counter(start_proxy, client_env, url) == 1
    auto = start_proxy(mode="auto", cassette="c")
    client_env(auto)
    with httpx.Client() as client:
        # 1 is replayed from the table loaded at start; 2 and 3 are new, forwarded, recorded.
        assert [client.get(url).json()["count"] for _ in range(3)] == [1, 2, 3]
        assert auto.admin("POST", "/api/replay/reset").status_code < 300
        assert [client.get(url).json()["count"] for _ in range(3)] == [1, 2, 3]
        assert client.get(url).json()["count"] == 4, "past the recordings, auto forwards"
