"""What the proxy still did wrong on a newcomer's first day (issue 32), through the real
proxy with real clients."""

from __future__ import annotations

import signal
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.trust import client_bundle
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_with_a_stream_open_ends_with_the_summary_and_no_traceback(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, data_dir: Path, sig: int
) -> None:
    """Point 4: the stop ended in an asyncio ``CancelledError`` traceback after the clean
    summary, from the connection handlers that asyncio.run cancelled."""
    proxy = start_proxy(mode="record", cassette="stopped")
    first_bytes = threading.Event()
    ended: list[BaseException | None] = []

    def stream() -> None:
        try:
            trust = ssl.create_default_context(cafile=client_bundle(data_dir))
            with httpx.Client(proxy=proxy.url, verify=trust) as client:
                url = upstream.url("/sse/slow?events=200&gap_ms=100")
                with client.stream("GET", url, timeout=30) as answer:
                    for _ in answer.iter_bytes():
                        first_bytes.set()
            ended.append(None)
        except httpx.HTTPError as exc:
            ended.append(exc)

    client = threading.Thread(target=stream)
    client.start()
    try:
        assert first_bytes.wait(30), proxy.log
        assert proxy.stop(sig) == 0
    finally:
        client.join(30)
    assert ended and isinstance(ended[0], httpx.HTTPError), "the stream was cut by the stop"
    log = proxy.log
    summary = log.index("stopped: recorded 1 (1 incomplete)")
    assert "Traceback" not in log and "CancelledError" not in log, log[summary:]
    assert "the proxy was stopped while this exchange was in flight" in log


def test_record_into_keeps_the_url_the_agent_called_for_a_streamed_answer(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, data_dir: Path
) -> None:
    """Point 2: a streamed answer, re-enacted through the loopback server, was stored in the
    new run under that server's URL (``http://127.0.0.1:PORT/...``)."""
    url = upstream.url("/sse/slow?events=3&gap_ms=10")
    bundle = ssl.create_default_context(cafile=client_bundle(data_dir))
    recorder = start_proxy(mode="record", cassette="streamed")
    with httpx.Client(proxy=recorder.url, verify=bundle, timeout=30) as client:
        recorded = client.get(url).content
    recorder.stop()
    replayer = start_proxy(
        mode="replay", cassette="streamed", args=("--record-into", "streamed-again")
    )
    with httpx.Client(proxy=replayer.url, verify=bundle, timeout=30) as client:
        assert client.get(url).content == recorded
    replayer.stop()
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        (again,) = store.exchanges("streamed-again")
        (original,) = store.exchanges("streamed")
    assert again.url == original.url == url
    assert f"recorded streamed-again#0 GET {url} as replayed from streamed#0" in replayer.log


@pytest.mark.parametrize(
    ("headers", "outcome"),
    [({"mcp-session-id": "s-1"}, "client_closed"), ({}, "truncated")],
    ids=["mcp-listening-stream", "a-plain-stream"],
)
def test_an_mcp_listening_stream_closed_by_its_client_is_client_closed(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    data_dir: Path,
    headers: dict[str, str],
    outcome: str,
) -> None:
    """Point 18: the MCP TypeScript SDK's standalone GET stream, closed by ``client.close()``
    after its headers, was recorded ``truncated`` and triaged as ``upstream_failure``. A
    plain stream closed before any of its body came is still a wait cut short."""
    proxy = start_proxy(mode="record", cassette="listening")
    trust = ssl.create_default_context(cafile=client_bundle(data_dir))
    with httpx.Client(proxy=proxy.url, verify=trust, timeout=30) as client:
        url = upstream.url("/sse/idle?seconds=5")
        with client.stream("GET", url, headers={"accept": "text/event-stream", **headers}):
            pass  # the headers came: close, as client.close() does
    (row,) = proxy.stored("listening", 1)
    assert row["outcome"] == outcome
