"""A client that stops reading is not an upstream that cut its answer (issue 22).

An MCP client closes each POST's SSE answer once it has its result; an agent stops a stream
once it has what it wanted. The upstream cut nothing, so the exchange is recorded as
``client_closed``, not ``truncated``: replay serves what arrived and ends it cleanly, and the
case file shows no failure for it.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
STREAM = "/sse/slow?events=6&gap_ms=150"


def first_event(url: str) -> bytes:
    """Read the stream until its first event, then close it, as a satisfied client does."""
    read = b""
    with httpx.Client(timeout=10) as client, client.stream("GET", url) as response:
        for line in response.iter_lines():
            read += line.encode() + b"\n"
            if line.startswith("data:"):
                return read
    raise AssertionError(f"{url} sent no event")


def test_an_early_close_is_recorded_as_the_clients_and_replayed_whole(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    read = first_event(upstream.url(STREAM))
    [row] = recorder.stored("default", 1)
    assert row["outcome"] == "client_closed"
    page = recorder.admin("GET", "/cassettes/default/0", headers={"accept": "text/html"}).text
    assert "outcome-client_closed" in page
    assert "the client closed the connection once it had read what it wanted" in page
    assert "outcome-truncated" not in page
    recorded = recorder.admin("GET", "/cassettes/default/0/body/response").content
    assert recorded.startswith(read.rstrip(b"\n"))
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(timeout=10) as client:
        replayed = client.get(upstream.url(STREAM))  # reads to the end: no cut to raise on
    assert replayed.status_code == 200
    assert replayed.content == recorded
    assert upstream.connections == 0
