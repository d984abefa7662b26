"""Failures are recordings too: a cut-off 429, an unreachable upstream, a stopped proxy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anthropic
import httpx
import openai
import pytest
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream, rate_limit_body

from freezeframe.storage import Outcome, open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def read_429(url: str) -> tuple[int, dict[str, str], bytes, type[Exception] | None]:
    """What a client observes: status, headers, the body bytes it got, the error it raised."""
    received = bytearray()
    with httpx.Client(timeout=10) as client, client.stream("POST", url, json={"q": 1}) as response:
        try:
            for chunk in response.iter_raw():
                received += chunk
        except httpx.HTTPError as exc:
            return response.status_code, dict(response.headers), bytes(received), type(exc)
    return response.status_code, dict(response.headers), bytes(received), None


def test_429_with_partial_body_replays_the_same_bytes_and_the_same_exception(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    url = f"{upstream.base_url}/v1/ratelimited"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    status, headers, body, error = read_429(url)
    assert status == 429
    assert error is httpx.RemoteProtocolError
    assert 0 < len(body) < len(rate_limit_body(1))
    assert rate_limit_body(1).startswith(body)
    recorder.stop()

    upstream.reset_counters()
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert read_429(url) == (status, headers, body, error)
    assert upstream.connections == 0

    with open_store(f"sqlite:///{recorder.data_dir / 'freezeframe.db'}") as store:
        (summary,) = store.exchanges("default")
        assert summary.outcome is Outcome.TRUNCATED
        assert summary.status == 429


def test_complete_429_replays_with_its_body_and_retry_after(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/ratelimited/full"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = httpx.get(url)
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed = httpx.get(url)
    assert (replayed.status_code, replayed.headers.raw, replayed.content) == (
        recorded.status_code,
        recorded.headers.raw,
        recorded.content,
    )
    assert replayed.status_code == 429 and replayed.headers["retry-after"] == "0"


def test_unreachable_upstream_is_recorded_and_replayed_as_that_failure(
    start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"https://localhost:{free_port()}/v1/chat/completions"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = httpx.post(url, json={"model": "m"})
    assert recorded.status_code == 502
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed = httpx.post(url, json={"model": "m"})
    assert (replayed.status_code, replayed.text) == (recorded.status_code, recorded.text)
    with open_store(f"sqlite:///{recorder.data_dir / 'freezeframe.db'}") as store:
        exchange = store.exchange("default", 0)
    assert exchange.recorded.outcome is Outcome.FAILED
    assert exchange.recorded.response is None and exchange.recorded.error


def test_a_refused_upstream_reaches_the_sdks_as_their_error_with_the_cause(
    start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    """Not a bare 502 with an HTML page: each SDK's exception says which upstream refused."""
    port = free_port()
    recorder = start_proxy(mode="record")
    client_env(recorder)
    base = f"https://localhost:{port}"
    chat = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-refused", max_retries=0)
    with pytest.raises(openai.InternalServerError) as by_openai:
        chat.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    claude = anthropic.Anthropic(base_url=base, api_key="sk-ant-refused", max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as by_anthropic:
        claude.messages.create(
            model="claude-opus-4-7", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    for raised in (by_openai.value, by_anthropic.value):
        assert raised.status_code == 502
        said = str(raised)
        assert f"the upstream localhost:{port} could not be reached" in said
        assert "refused" in said.lower()


def test_sigterm_mid_stream_keeps_the_store_whole(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    before = httpx.get(f"{upstream.base_url}/tool/counter").json()
    first_event = threading.Event()

    def consume() -> None:
        url = f"{upstream.base_url}/sse/slow?events=50&gap_ms=100"
        try:
            with httpx.stream("GET", url, timeout=30) as response:
                for _ in response.iter_raw():
                    first_event.set()
        except httpx.HTTPError:
            pass

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    assert first_event.wait(10), "the stream never started"
    time.sleep(0.3)
    assert recorder.stop() == 0
    reader.join(10)

    with open_store(f"sqlite:///{recorder.data_dir / 'freezeframe.db'}") as store:
        assert store.verify("default").ok
        first, streamed = store.exchanges("default")
        assert first.outcome is Outcome.COMPLETE
        assert streamed.outcome in (Outcome.INCOMPLETE, Outcome.COMPLETE)
        partial = store.exchange("default", 1).recorded.response
        assert partial is not None and partial.body.startswith(b"data: ")

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert httpx.get(f"{upstream.base_url}/tool/counter").json() == before


def test_an_upstream_that_never_answers_times_the_client_out_again_on_replay(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/hang?seconds=4"

    def wait() -> tuple[type[Exception], float]:
        start = time.monotonic()
        with pytest.raises(httpx.TimeoutException) as timed_out:
            httpx.get(url, timeout=1.0)
        return type(timed_out.value), time.monotonic() - start

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded, _ = wait()
    # The proxy sees the client go before it is stopped: a stop first would record the
    # exchange as cut off by the stop instead (a fixed sleep lost that race under load).
    assert "ms: Client disconnected." in recorder.logged("ms: Client disconnected.")
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed, waited = wait()
    assert replayed is recorded and waited >= 0.9
    assert upstream.connections == 0


def test_an_upstream_certificate_that_fails_verification_replays_as_the_same_502(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    recorder = start_proxy(mode="record", upstream_ca=None)
    client_env(recorder)
    recorded = httpx.get(url)
    assert recorded.status_code == 502 and "certificate" in recorded.text.lower()
    recorder.stop()

    replayer = start_proxy(mode="replay", upstream_ca=None)
    client_env(replayer)
    replayed = httpx.get(url)
    assert (replayed.status_code, replayed.text) == (recorded.status_code, recorded.text)


@pytest.mark.postgres
def test_a_store_that_goes_away_never_turns_replay_into_forwarding(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    postgres_url: str,
) -> None:
    from conftest import pg_admin

    url = f"{upstream.base_url}/tool/counter"
    recorder = start_proxy(mode="record", store=postgres_url)
    client_env(recorder)
    httpx.get(url)
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay", store=postgres_url)
    client_env(replayer)
    name = postgres_url.rsplit("/", 1)[1]
    with pg_admin() as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    # The cassette replay loaded at start still answers from memory; one it has not loaded
    # needs the store, and gets a 503: neither is ever forwarded.
    loaded = httpx.get(url, timeout=30)
    assert loaded.status_code == 200
    answer = httpx.get(url, timeout=30, headers={"X-Freezeframe-Cassette": "not-loaded"})
    assert answer.status_code == 503
    assert answer.headers["x-should-retry"] == "false"
    assert "cannot replay" in answer.json()["error"]["message"]
    assert upstream.connections == 0, "replay forwarded when the store failed"
