"""Upstreams that break HTTP while recording: the proxy stays up, each exchange is stored
with the outcome its client saw, and replay gives the client that failure again."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
import trustme
from support.misbehaving import CUT_BODY, FIRST_EVENT, Misbehaving
from support.proxy import ProxyProcess

from freezeframe.storage import Exchange, open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


@pytest.fixture
def misbehaving(upstream_ca: trustme.CA) -> Iterator[Misbehaving]:
    server = Misbehaving(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


def received(url: str, read_timeout: float = 2.0) -> tuple[bytes, BaseException | None]:
    """What a client got of ``url`` before its read ended, and how it ended."""
    got = b""
    timeout = httpx.Timeout(10.0, read=read_timeout)
    try:
        with httpx.stream("GET", url, timeout=timeout) as response:
            for piece in response.iter_raw():
                got += piece
    except httpx.HTTPError as exc:
        return got, exc
    return got, None


def stored(proxy: ProxyProcess, seq: int) -> Exchange:
    with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}", create=False) as store:
        store.flush(10)
        return store.exchange("default", seq)


def still_serving(proxy: ProxyProcess, base_url: str) -> None:
    """The proxy answers its admin port and proxies the next request."""
    assert proxy.admin("GET", "/health").json()["status"] == "ok"
    assert httpx.get(f"{base_url}/elsewhere", timeout=10).status_code == 404


def test_headers_then_silence_is_recorded_as_what_the_client_got_and_replayed_so(
    misbehaving: Misbehaving,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    proxy = start_proxy(mode="record")
    client_env(proxy)
    got, ended = received(f"{misbehaving.base_url}/stall")
    assert got == FIRST_EVENT and isinstance(ended, httpx.ReadTimeout)
    still_serving(proxy, misbehaving.base_url)
    proxy.stop()
    exchange = stored(proxy, 0)
    assert exchange.recorded.response is not None and exchange.recorded.response.body == FIRST_EVENT
    assert exchange.recorded.outcome.value != "complete"

    replay = start_proxy(mode="replay", args=("--replay-pace", "instant"))
    client_env(replay)
    again, ended_again = received(f"{misbehaving.base_url}/stall")
    assert again == FIRST_EVENT and isinstance(ended_again, httpx.HTTPError)
    assert misbehaving.requests == ["/stall", "/elsewhere"], "replay reached the upstream"


@pytest.mark.parametrize(
    ("path", "prefix"),
    [("/bad-chunked", b'{"a":'), ("/unclean-close", CUT_BODY)],
    ids=["invalid-chunked-encoding", "tls-closed-uncleanly"],
)
def test_a_broken_body_is_recorded_truncated_and_replayed_as_the_same_error(
    path: str,
    prefix: bytes,
    misbehaving: Misbehaving,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    proxy = start_proxy(mode="record")
    client_env(proxy)
    got, ended = received(f"{misbehaving.base_url}{path}")
    assert isinstance(ended, httpx.RemoteProtocolError), ended
    assert prefix.startswith(got) or got.startswith(prefix[: len(got)])
    still_serving(proxy, misbehaving.base_url)
    proxy.stop()
    exchange = stored(proxy, 0)
    assert exchange.recorded.outcome.value == "truncated"
    assert exchange.recorded.response is not None and exchange.recorded.response.body == got

    replay = start_proxy(mode="replay", args=("--replay-pace", "instant"))
    client_env(replay)
    again, ended_again = received(f"{misbehaving.base_url}{path}")
    assert (again, type(ended_again)) == (got, type(ended))
    assert misbehaving.requests == [path, "/elsewhere"], "replay reached the upstream"
