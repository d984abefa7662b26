"""What one client or one upstream of the proxy port can make the proxy hold."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import httpx
import psutil
import pytest
import trustme
from support.memory import peak_rss
from support.misbehaving import ONE_BYTE_CHUNKS, Misbehaving
from support.proxy import ProxyProcess

from freezeframe.addons.record import PACED_GAP, TIMED_CHUNKS
from freezeframe.proxy.master import REQUEST_HEAD_BYTES
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


@pytest.fixture
def misbehaving(upstream_ca: trustme.CA) -> Iterator[Misbehaving]:
    server = Misbehaving(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


def test_a_request_head_that_never_ends_is_answered_431_and_not_held(
    start_proxy: Callable[..., ProxyProcess],
) -> None:
    """mitmproxy buffers an HTTP/1 request head until it ends (394 MB of one that did not):
    past REQUEST_HEAD_BYTES the client gets 431 and the connection is closed."""
    proxy = start_proxy(mode="record")
    sent = 0
    with peak_rss(proxy.process.pid) as rss:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
            sock.sendall(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-Long: ")
            try:
                while sent < 128 * 1024 * 1024:
                    sock.sendall(b"a" * 65536)
                    sent += 65536
            except (BrokenPipeError, ConnectionResetError):
                pass
            sock.settimeout(10)
            try:
                answer = sock.recv(65536)
            except ConnectionResetError:
                answer = b"(reset)"
    assert sent < 128 * 1024 * 1024, "the proxy read a head of 128 MiB"
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert rss[1] - rss[0] < 32 * 1024 * 1024, f"grew by {(rss[1] - rss[0]) >> 20} MiB"
    assert sent >= REQUEST_HEAD_BYTES
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        head = b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-Long: "
        sock.sendall(head + b"a" * (64 * 1024) + b"\r\n\r\n")  # long, but it ends
        assert not sock.recv(100).startswith(b"HTTP/1.1 431 ")


def _writer(proxy: ProxyProcess) -> psutil.Process:
    (writer,) = [
        child
        for child in psutil.Process(proxy.process.pid).children()
        if "writerchild" in " ".join(child.cmdline())
    ]
    return writer


def test_an_answer_in_one_byte_chunks_costs_memory_by_its_duration_not_its_chunks(
    misbehaving: Misbehaving,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    """A 1 MB answer in 1-byte chunks took +372 MB in the proxy, +260 MB in the writer and
    +26 MB in the store: a timing entry and a held object per chunk. Past TIMED_CHUNKS the
    timing is kept in PACED_GAP steps, small pieces are gathered, and the body is recorded
    whole."""
    proxy = start_proxy(mode="record")
    client_env(proxy)
    writer = _writer(proxy)
    with peak_rss(proxy.process.pid) as in_proxy, peak_rss(writer.pid) as in_writer:
        began = time.monotonic()
        got = httpx.get(f"{misbehaving.base_url}/one-byte-chunks", timeout=120)
        took = time.monotonic() - began
        with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}", create=False) as store:
            store.flush(30)
            response = store.exchange("default", 0).recorded.response
    assert got.status_code == 200 and got.content == b"x" * ONE_BYTE_CHUNKS
    assert response is not None and response.body == got.content
    assert len(response.chunks) <= TIMED_CHUNKS + took / PACED_GAP + 1
    grown = {
        "proxy": (in_proxy[1] - in_proxy[0]) >> 20,
        "writer": (in_writer[1] - in_writer[0]) >> 20,
    }
    print(f"1 MB in 1-byte chunks: {len(response.chunks)} timings, grown {grown} MiB")
    # The pieces are gathered as they arrive (storage.inflight): an object per 1-byte piece,
    # held until the body landed, grew the proxy by 142 MiB.
    assert grown["proxy"] < 48 and grown["writer"] < 64, grown
    database = proxy.data_dir / "freezeframe.db"
    assert database.stat().st_size < 4 * 1024 * 1024
