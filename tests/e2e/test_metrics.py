"""GET /metrics: a Prometheus scrape of a proxy that recorded, was rate limited, replayed
and missed, read with Prometheus' own text parser."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}


def scrape(proxy: ProxyProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by name and labels."""
    response = proxy.admin("GET", "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_a_scrape_counts_what_was_recorded_rate_limited_replayed_and_missed(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record", cassette="incident")
    client_env(proxy)
    host = httpx.URL(upstream.base_url).host
    for n in range(3):
        chat = CHAT | {"messages": [{"role": "user", "content": f"hello {n}"}]}
        assert httpx.post(f"{upstream.base_url}/v1/chat/completions", json=chat).is_success
    with pytest.raises(httpx.HTTPError):  # the 429's body is cut off mid-way
        httpx.post(f"{upstream.base_url}/v1/ratelimited", json=CHAT).read()

    def recorded() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        samples = scrape(proxy)
        assert samples[("freezeframe_store_queue_depth", ())] >= 0
        return samples

    samples = recorded()
    for _ in range(50):  # the writer commits in the background
        if samples[("freezeframe_store_exchanges_written_total", ())] >= 4:
            break
        time.sleep(0.1)
        samples = recorded()
    chat_200 = (("host", host), ("outcome", "complete"), ("status", "200"))
    limited = (("host", host), ("outcome", "truncated"), ("status", "429"))
    assert samples[("freezeframe_exchanges_recorded_total", chat_200)] == 3
    assert samples[("freezeframe_exchanges_recorded_total", limited)] == 1
    assert samples[("freezeframe_rate_limited_total", (("host", host),))] == 1
    assert samples[("freezeframe_truncated_total", (("host", host),))] == 1
    assert samples[("freezeframe_store_exchanges_written_total", ())] == 4
    assert samples[("freezeframe_store_write_seconds_count", ())] >= 1
    assert samples[("freezeframe_store_write_seconds_sum", ())] > 0
    assert samples[("freezeframe_store_bodies_stored_total", ())] >= 8
    assert 0 < samples[("freezeframe_store_stored_bytes_total", ())]

    proxy.admin("PUT", "/api/mode", json={"mode": "replay"})
    chat = CHAT | {"messages": [{"role": "user", "content": "hello 0"}]}
    assert httpx.post(f"{upstream.base_url}/v1/chat/completions", json=chat).is_success
    missed = httpx.post(f"{upstream.base_url}/v1/chat/completions", json=CHAT | {"n": 9})
    assert missed.status_code >= 400
    samples = scrape(proxy)
    incident = (("cassette", "incident"),)
    assert samples[("freezeframe_replay_hits_total", incident)] == 1
    assert samples[("freezeframe_replay_misses_total", incident)] == 1
    assert samples.get(("freezeframe_replay_drift_total", incident), 0) == 0


def test_a_scrape_never_carries_a_secret_or_a_request_path(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record")
    client_env(proxy)
    secret = "sk-live-metrics-0123456789abcdef"
    httpx.post(
        f"{upstream.base_url}/v1/chat/completions?customer=c-8821",
        json=CHAT,
        headers={"authorization": f"Bearer {secret}"},
    )
    text = proxy.admin("GET", "/metrics").text
    assert secret not in text
    assert "c-8821" not in text and "/v1/chat" not in text
