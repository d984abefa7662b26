"""A body far larger than the proxy's memory budget streams through, both ways."""

from __future__ import annotations

from collections.abc import Callable

import blake3
import httpx
import pytest
from support.memory import GROWTH_LIMIT, peak_rss
from support.proxy import ProxyProcess
from support.upstream import Upstream, random_chunks

from freezeframe.addons.record import PACED_STEP
from freezeframe.addons.uploads import LARGE_BODY
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
SIZE = 160 * 1024 * 1024
PAST_IN_MEMORY = LARGE_BODY + PACED_STEP


def download(url: str) -> str:
    digest = blake3.blake3()
    with httpx.stream("GET", url, timeout=120) as response:
        assert response.status_code == 200
        for piece in response.iter_raw():
            digest.update(piece)
    return digest.hexdigest()


def test_a_large_download_is_recorded_and_replayed_with_flat_memory(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = f"{upstream.base_url}/bytes/random?size={SIZE}&seed=7"
    expected = blake3.blake3(b"".join(random_chunks(SIZE, 7))).hexdigest()

    recorder = start_proxy(mode="record")
    client_env(recorder)
    assert recorder.process is not None
    with peak_rss(recorder.process.pid) as rss:
        assert download(url) == expected
    assert rss[1] - rss[0] < GROWTH_LIMIT, f"recording grew the proxy by {rss[1] - rss[0]} bytes"
    recorder.stop()
    with open_store(f"sqlite:///{recorder.data_dir / 'freezeframe.db'}") as store:
        response = store.exchange("default", 0).recorded.response
        assert response is not None and response.body_ref is not None
        assert response.body_ref.size == SIZE
        assert store.verify("default").ok
        steps = [chunk.offset for chunk in response.chunks if chunk.offset > PAST_IN_MEMORY]
        assert len(steps) <= SIZE // PACED_STEP, "past 8 MiB, pacing is kept per MiB"
        assert all(b - a >= PACED_STEP for a, b in zip(steps, steps[1:], strict=False))

    upstream.reset_counters()
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert replayer.process is not None
    with peak_rss(replayer.process.pid) as rss:
        assert download(url) == expected
    assert rss[1] - rss[0] < GROWTH_LIMIT, f"replay grew the proxy by {rss[1] - rss[0]} bytes"
    assert upstream.connections == 0
