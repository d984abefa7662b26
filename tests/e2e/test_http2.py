"""HTTP/2 on both sides of the proxy, where both sides speak it, and HTTP/1.1 where not.

The upstream here (``support.h2_upstream``) offers ``h2`` and ``http/1.1`` and notes the
version every request arrived on, so these tests see what the proxy spoke upstream, not
only what it spoke to the client. Replay must give the client the same bytes, the same
stream pacing and the same failure, and must never open a connection to the upstream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import trustme
from support.h2_upstream import H2Upstream
from support.proxy import ProxyProcess

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
TIMEOUT = 10.0
SSE_GAP_MS = 200
SSE_EVENTS = 5
VERSIONS = pytest.mark.parametrize("http2", [True, False], ids=["http2-client", "http1-client"])


@pytest.fixture
def h2_upstream(upstream_ca: trustme.CA) -> Iterator[H2Upstream]:
    server = H2Upstream(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


def expected_version(http2: bool) -> str:
    """The proxy speaks to the upstream the version the client speaks to it."""
    return "HTTP/2" if http2 else "HTTP/1.1"


def stream(client: httpx.Client, url: str) -> tuple[int, list[bytes], list[float], str | None]:
    """Status, the pieces a client reads and when, and how the read failed (if it did)."""
    pieces: list[bytes] = []
    times: list[float] = []
    start = time.monotonic()
    with client.stream("GET", url) as response:
        try:
            for piece in response.iter_raw():
                pieces.append(piece)
                times.append(time.monotonic() - start)
        except httpx.HTTPError as exc:
            return response.status_code, pieces, times, type(exc).__name__
    return response.status_code, pieces, times, None


@VERSIONS
def test_answers_record_over_the_clients_http_version_and_replay_without_the_upstream(
    http2: bool,
    h2_upstream: H2Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    url = h2_upstream.url("/json")

    def ask(client: httpx.Client) -> list[httpx.Response]:
        return [
            client.post(url, json={"question": "a", "n": 1}),
            client.get(url, params={"q": "b"}),
            client.post(url, json={"question": "a", "n": 1}),
        ]

    recorder = start_proxy(mode="record")
    client_env(recorder)
    with httpx.Client(http2=http2, timeout=TIMEOUT) as client:
        recorded = ask(client)
    recorder.stop()
    version = expected_version(http2)
    assert [r.http_version for r in recorded] == [version] * 3
    assert [r.http_version for r in h2_upstream.requests] == [version] * 3
    assert [r.json()["n"] for r in recorded] == [1, 2, 3]
    assert {r.json()["http_version"] for r in recorded} == {version}

    connections = h2_upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(http2=http2, timeout=TIMEOUT) as client:
        replayed = ask(client)
    assert [r.http_version for r in replayed] == [version] * 3
    assert [r.content for r in replayed] == [r.content for r in recorded]
    assert h2_upstream.connections == connections, "replay reached the upstream"


@VERSIONS
def test_an_event_stream_replays_event_by_event_at_its_recorded_pace(
    http2: bool,
    h2_upstream: H2Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    url = h2_upstream.url(f"/sse?events={SSE_EVENTS}&gap_ms={SSE_GAP_MS}")

    recorder = start_proxy(mode="record")
    client_env(recorder)
    with httpx.Client(http2=http2, timeout=TIMEOUT) as client:
        status, pieces, recorded, failure = stream(client, url)
    recorder.stop()
    assert (status, failure) == (200, None)
    assert h2_upstream.requests[-1].http_version == expected_version(http2)
    assert len(pieces) == SSE_EVENTS, "the events did not arrive one by one"

    connections = h2_upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(http2=http2, timeout=TIMEOUT) as client:
        replay_status, replayed_pieces, replayed, replay_failure = stream(client, url)
    assert (replay_status, replay_failure) == (200, None)
    assert replayed_pieces == pieces, "the client read the same events, split the same way"
    for want, got in zip(gaps(recorded), gaps(replayed), strict=True):
        assert abs(got - want) <= max(0.3 * want, 0.05), (gaps(recorded), gaps(replayed))
    assert h2_upstream.connections == connections, "replay reached the upstream"


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


@pytest.mark.parametrize(
    ("http2", "code"),
    [(True, "INTERNAL_ERROR"), (True, "CANCEL"), (False, "INTERNAL_ERROR")],
    ids=["http2-client-rst-internal-error", "http2-client-rst-cancel", "http1-client-tcp-rst"],
)
def test_a_stream_reset_mid_body_replays_as_the_same_client_failure(
    http2: bool,
    code: str,
    h2_upstream: H2Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    """Over HTTP/2 the upstream sends RST_STREAM with ``code``; over HTTP/1.1 (whose
    client made the proxy speak HTTP/1.1 upstream) it can only reset the connection."""
    url = h2_upstream.url(f"/reset?code={code}")

    def read() -> tuple[int, bytes, str | None]:
        with httpx.Client(http2=http2, timeout=TIMEOUT) as client:
            status, pieces, _, failure = stream(client, url)
        return status, b"".join(pieces), failure

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = read()
    recorder.stop()
    assert h2_upstream.requests[-1].http_version == expected_version(http2)
    assert recorded[0] == 200 and b"piece 1" in recorded[1]
    assert recorded[2] is not None, "the reset did not reach the client"

    connections = h2_upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert read() == recorded
    assert h2_upstream.connections == connections, "replay reached the upstream"


def test_what_was_recorded_over_http2_replays_to_an_http1_client(
    h2_upstream: H2Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    """An HTTP/2 answer has no content-length or chunked framing of its own; an HTTP/1.1
    client must still see where each body ends, and where one was cut."""
    answer = h2_upstream.url("/json")
    events = h2_upstream.url(f"/sse?events={SSE_EVENTS}&gap_ms=50")
    reset = h2_upstream.url("/reset")

    recorder = start_proxy(mode="record")
    client_env(recorder)
    with httpx.Client(http2=True, timeout=TIMEOUT) as client:
        recorded = [client.get(answer), stream(client, events), stream(client, reset)]
    recorder.stop()
    assert {r.http_version for r in h2_upstream.requests} == {"HTTP/2"}

    connections = h2_upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(http2=False, timeout=TIMEOUT) as client:
        replayed = [client.get(answer), stream(client, events), stream(client, reset)]
    assert replayed[0].http_version == "HTTP/1.1"
    assert replayed[0].content == recorded[0].content
    for (status, pieces, _, failure), (want_status, want, _, want_failure) in zip(
        replayed[1:], recorded[1:], strict=True
    ):
        assert (status, b"".join(pieces), failure) == (want_status, b"".join(want), want_failure)
    assert h2_upstream.connections == connections, "replay reached the upstream"
