"""Replay re-enacts how bytes arrived: stream gaps, rate-limit waits, resets, encodings."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Iterator

import anthropic
import httpx
import pytest
import trustme
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
GAPS = (0.05, 0.35, 0.02, 0.25, 0.1)


@pytest.fixture
def slow_upstream(upstream_ca: trustme.CA) -> Iterator[Upstream]:
    server = Upstream(upstream_ca, stream_gaps=GAPS).start()
    try:
        yield server
    finally:
        server.stop()


def stream_arrivals(url: str) -> tuple[list[bytes], list[float]]:
    """The pieces a client reads from a streamed chat completion, and when."""
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "a b"}],
    }
    pieces: list[bytes] = []
    times: list[float] = []
    start = time.monotonic()
    with httpx.stream("POST", url, json=body, timeout=30) as response:
        for piece in response.iter_raw():
            pieces.append(piece)
            times.append(time.monotonic() - start)
    return pieces, times


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_a_stream_replays_with_its_recorded_gaps_and_collapses_at_instant_pace(
    slow_upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{slow_upstream.base_url}/v1/chat/completions"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    pieces, recorded = stream_arrivals(url)
    assert len(pieces) >= len(GAPS)
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed_pieces, replayed = stream_arrivals(url)
    assert replayed_pieces == pieces, "the client read the same pieces, split the same way"
    for want, got in zip(gaps(recorded), gaps(replayed), strict=True):
        assert abs(got - want) <= max(0.2 * want, 0.02), (gaps(recorded), gaps(replayed))

    replayer.admin("PUT", "/api/mode", json={"pace": "0.5"})
    _, halved = stream_arrivals(url)
    # First piece to last: the connection's set-up is not the recording's to halve.
    half = (recorded[-1] - recorded[0]) / 2
    took = halved[-1] - halved[0]
    assert 0.8 * half - 0.02 <= took <= 1.25 * half + 0.1, (recorded, halved)

    replayer.admin("PUT", "/api/mode", json={"pace": "instant"})
    instant_pieces, instant = stream_arrivals(url)
    assert b"".join(instant_pieces) == b"".join(pieces)
    span = recorded[-1] - recorded[0]
    assert instant[-1] - instant[0] < 0.1 * span, "instant pace kept the recorded delays"
    assert slow_upstream.connections == 1


def test_a_recorded_retry_after_costs_real_time_except_at_instant_pace(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def ask() -> float:
        with anthropic.Anthropic(
            base_url=upstream.base_url, api_key="sk-ant-x", max_retries=1
        ) as client:
            start = time.monotonic()
            with pytest.raises(anthropic.RateLimitError):
                client.post(
                    "/ratelimited/full?retry_after=1&retryable=1",
                    cast_to=httpx.Response,
                    body={"model": "claude-sonnet-5-5"},
                )
            return time.monotonic() - start

    recorder = start_proxy(mode="record")
    client_env(recorder)
    assert ask() >= 1.0, "the SDK did not sleep for the recorded retry-after"
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert ask() >= 1.0
    replayer.admin("PUT", "/api/mode", json={"pace": "instant"})
    assert ask() < 0.8
    answer = httpx.post(f"{upstream.base_url}/ratelimited/full?retry_after=1&retryable=1")
    assert answer.status_code == 404, "two recordings, both served"
    replayer.admin("POST", "/api/replay/reset")
    answer = httpx.post(
        f"{upstream.base_url}/ratelimited/full?retry_after=1&retryable=1",
        json={"model": "claude-sonnet-5-5"},
    )
    assert (answer.status_code, answer.headers["retry-after"]) == (429, "0")


def test_a_reset_mid_stream_replays_as_the_same_client_error(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def read() -> tuple[int, bytes, type[Exception] | None]:
        received = bytearray()
        with httpx.stream("GET", f"{upstream.base_url}/reset-midstream", timeout=10) as response:
            try:
                for piece in response.iter_raw():
                    received += piece
            except httpx.HTTPError as exc:
                return response.status_code, bytes(received), type(exc)
        return response.status_code, bytes(received), None

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = read()
    assert recorded[0] == 200 and recorded[2] is not None and b"chunk 1" in recorded[1]
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert read() == recorded


def test_gzip_is_stored_raw_and_replayed_raw_and_compressed_requests_key_by_content(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    payload = b'{"query": "cats", "limit": 5}'
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}

    recorder = start_proxy(mode="record")
    client_env(recorder)
    with httpx.Client() as client:
        recorded = client.get(f"{upstream.base_url}/gzip")
        assert recorded.headers["content-encoding"] == "gzip"
        posted = client.post(
            f"{upstream.base_url}/tool/counter",
            content=gzip.compress(payload, compresslevel=9, mtime=1),
            headers=headers,
        )
    assert upstream.requests[-1].body == gzip.compress(payload, compresslevel=9, mtime=1)
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client() as client:
        raw = client.get(f"{upstream.base_url}/gzip")
        assert raw.headers["content-encoding"] == "gzip"
        assert raw.read() == recorded.content
        assert raw.headers.raw == recorded.headers.raw
        again = client.post(
            f"{upstream.base_url}/tool/counter",
            content=gzip.compress(payload, compresslevel=1, mtime=2),
            headers=headers,
        )
    assert again.json() == posted.json(), "a differently compressed body missed"


def test_an_http2_client_records_and_replays(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    with httpx.Client(http2=True) as client:
        recorded = client.get(url)
    assert recorded.http_version == "HTTP/2"
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(http2=True) as client:
        replayed = client.get(url)
    assert replayed.http_version == "HTTP/2"
    assert replayed.content == recorded.content
    assert upstream.connections == 1


def test_a_stream_that_died_with_an_error_event_dies_the_same_way_on_replay(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def consume() -> tuple[list[str], str]:
        with anthropic.Anthropic(
            base_url=upstream.base_url, api_key="sk-ant-x", max_retries=0
        ) as client:
            seen: list[str] = []
            with pytest.raises(anthropic.APIStatusError) as died:
                with client.messages.stream(
                    model="claude-sonnet-5-5",
                    max_tokens=64,
                    messages=[{"role": "user", "content": "one two three four"}],
                    extra_query={"overload_after": "2"},
                ) as stream:
                    seen.extend(stream.text_stream)
            return seen, type(died.value).__name__ + ": " + str(died.value)

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = consume()
    assert len(recorded[0]) == 2 and "overloaded" in recorded[1].lower()
    recorder.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert consume() == recorded
