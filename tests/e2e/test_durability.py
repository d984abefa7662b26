"""--durability strict: a client has an answer's end only once its exchange is stored."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from support.database import writes_blocked
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def test_strict_answers_end_only_once_stored_in_every_framing(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    proxy = start_proxy(mode="record", cassette="strict", args=("--durability", "strict"))
    client_env(proxy)
    store_url = f"sqlite:///{data_dir / 'freezeframe.db'}"

    def ask(path: str) -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            return client.get(f"{upstream.base_url}{path}")

    with ThreadPoolExecutor(2) as pool:
        for path in ("/tool/counter?q=1", "/sse/slow?events=3&gap_ms=10"):
            with writes_blocked(store_url):  # the writer cannot commit: the end must wait
                pending = pool.submit(ask, path)
                with pytest.raises(TimeoutError):
                    pending.result(timeout=1.5)
            answered = pending.result(timeout=30)
            assert answered.status_code == 200
    sized = ask("/tool/counter?q=2")
    assert sized.headers.get("transfer-encoding") == "chunked", "sent chunked, to end it last"
    proxy.stop()
    with open_store(store_url) as store:
        assert len(store.exchanges("strict")) == 3

    replayer = start_proxy(mode="replay", cassette="strict")
    client_env(replayer)
    replayed = ask("/tool/counter?q=2")
    assert int(replayed.headers["content-length"]) == len(replayed.content), "the upstream's"
    assert replayed.json() == sized.json()


@pytest.mark.postgres
def test_strict_cuts_an_answer_off_when_the_store_cannot_keep_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    postgres_url: str,
) -> None:
    from conftest import pg_admin

    proxy = start_proxy(
        mode="record", cassette="strict", store=postgres_url, args=("--durability", "strict")
    )
    client_env(proxy)
    with httpx.Client(timeout=60) as client:
        assert client.get(f"{upstream.base_url}/tool/counter").status_code == 200
        with pg_admin() as admin:
            admin.execute(f"DROP DATABASE {postgres_url.rsplit('/', 1)[1]} WITH (FORCE)")
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(f"{upstream.base_url}/tool/counter")
    assert "not committed to the store, so the answer is cut off" in proxy.log
