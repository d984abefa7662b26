"""Ctrl-C (or SIGTERM) on ``freezeframe run`` while an answer is still streaming (issue 32,
point 4): the stop used to end in an asyncio ``CancelledError`` traceback after the clean
summary, from the connection handlers that asyncio.run cancelled."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.trust import client_bundle

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_with_a_stream_open_ends_with_the_summary_and_no_traceback(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, data_dir: Path, sig: int
) -> None:
    proxy = start_proxy(mode="record", cassette="stopped")
    first_bytes = threading.Event()
    ended: list[BaseException | None] = []

    def stream() -> None:
        try:
            with httpx.Client(proxy=proxy.url, verify=str(client_bundle(data_dir))) as client:
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
