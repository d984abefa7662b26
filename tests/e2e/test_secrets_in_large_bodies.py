"""A secret in a body too large to hold is kept out of the store wherever the body is cut.

A large body is redacted as it streams, in fixed blocks (storage.inflight). A secret that the
network splits across two chunks, or that straddles a block's end, must be found all the
same; the upstream still gets every byte as the client sent it, and the same upload
replays, because its key is read from the body as stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import blake3
import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store
from freezeframe.storage.inflight import BLOCK, LARGE_BODY

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
SECRET = b"sk-proj-" + b"Q7vX2mN9pL4kR8sT1wY6zA3c"


def body_with_secrets() -> bytes:
    """Filler with the secret across the first block's end and across the end of what is
    held before the body spills."""
    body = bytearray(b"0123456789abcdef" * ((LARGE_BODY + 2 * BLOCK) // 16))
    for at in (BLOCK - 11, LARGE_BODY - 5):
        body[at - 1 : at + len(SECRET) + 1] = b" " + SECRET + b" "
    return bytes(body)


def pieces(body: bytes) -> Iterator[bytes]:
    """Chunks of an odd size, so the network's cuts fall anywhere but on a block's end."""
    step = 65_536 - 3
    return (body[i : i + step] for i in range(0, len(body), step))


def put(url: str, body: bytes) -> httpx.Response:
    headers = {"content-type": "application/octet-stream"}
    return httpx.put(url, content=pieces(body), headers=headers, timeout=120)


def test_a_secret_cut_by_chunks_and_blocks_of_a_large_upload_is_never_stored(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    url = upstream.url("/upload")
    body = body_with_secrets()

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = put(url, body)  # chunked: held, then spilled past LARGE_BODY
    assert recorded.json()["blake3"] == blake3.blake3(body).hexdigest()  # sent as it was
    assert recorder.stop() == 0
    with open_store(f"sqlite:///{recorder.data_dir / 'freezeframe.db'}") as store:
        stored = store.exchange("default", 0)
        ref = stored.recorded.request_body_ref
        kept = stored.recorded.request_body if ref is None else b"".join(store.read_blob(ref))
        assert len(kept) == len(body)
        assert SECRET not in kept and kept.count(b"[redacted:") == 2
        assert store.verify("default").ok

    upstream.reset_counters()
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert put(url, body).content == recorded.content
    assert upstream.connections == 0
    assert replayer.stop() == 0
