"""Request bodies built to hurt the recorder: it forwards them, keys them, and stays up."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import httpx
import pytest
from blake3 import blake3
from support.memory import peak_rss
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def gzip_bomb(size: int) -> bytes:
    """``size`` bytes of zeros, gzipped a MiB at a time (about 1 KiB per MiB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1024 * 1024)
    packed = b"".join(packer.compress(zeros) for _ in range(size // len(zeros)))
    return packed + packer.flush()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """1 GiB of zeros in about 1 MiB: decoded whole, it would take the proxy down."""
    return gzip_bomb(1024 * 1024 * 1024)


def test_a_compression_bomb_is_forwarded_and_keyed_as_sent_without_blowing_up_memory(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    bomb: bytes,
) -> None:
    assert len(bomb) < 4 * 1024 * 1024
    proxy = start_proxy(mode="record", cassette="bombs")
    client_env(proxy)
    assert proxy.process is not None
    headers = {"content-encoding": "gzip", "content-type": "application/json"}
    with peak_rss(proxy.process.pid) as rss, httpx.Client(timeout=60) as client:
        first = client.post(f"{upstream.base_url}/upload", content=bomb, headers=headers)
        second = client.post(f"{upstream.base_url}/upload", content=bomb, headers=headers)
    assert first.status_code == second.status_code == 200
    sent = first.json()
    assert (sent["size"], sent["blake3"]) == (len(bomb), blake3(bomb).hexdigest()), "as sent"
    assert rss[1] - rss[0] < 160 * 1024 * 1024, "the proxy decoded the bomb"
    assert "body keyed as sent: decodes to more than" in proxy.log
    proxy.stop()

    replayer = start_proxy(mode="replay", cassette="bombs")
    client_env(replayer)
    with httpx.Client(timeout=60) as client:
        again = client.post(f"{upstream.base_url}/upload", content=bomb, headers=headers)
    assert again.status_code == 200 and again.json() == first.json(), "the same key, a hit"
