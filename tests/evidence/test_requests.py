"""One request view: the proxy, rekey, explain, resend and imports key a request alike.

Each reader used to build its own view: ``explain`` did not decode a compressed body, and
``resend`` decoded one up to 64 MiB where the proxy stops at 16 MiB (storage.encodings
.HELD_DECODED), so the same request got different keys depending on who asked.
"""

from __future__ import annotations

import gzip
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from click.testing import CliRunner
from support.addon_chain import KEY, Answer, Chain, request, sqlite_store
from support.upstream import Upstream

from freezeframe import cli
from freezeframe.canonicalize import KeyConfig, canonicalize
from freezeframe.evidence.requests import WireRequest, stored_view
from freezeframe.exchange_formats.captured import Captured, Keeper
from freezeframe.proxy.settings import KEY_FILENAME
from freezeframe.storage import Exchange, Outcome, Store
from freezeframe.storage.encodings import HELD_DECODED
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.resend import resend

SMALL = gzip.compress(json.dumps({"model": "m", "input": "hello"}).encode())
#: decodes to more than the proxy holds: keyed by its bytes as sent, by everyone
BOMB = gzip.compress(json.dumps({"pad": "0" * (HELD_DECODED + 1)}).encode())
HEADERS = [("content-type", "application/json"), ("content-encoding", "gzip")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with sqlite_store(tmp_path) as opened:
        yield opened


async def recorded(store: Store, url: str, body: bytes) -> Exchange:
    async with Chain(store) as chain:
        await chain.send(request("POST", url, body, HEADERS), [body], Answer())
    store.flush(10)
    (summary,) = store.exchanges("default")
    return store.exchange("default", summary.seq)


def explained(tmp_path: Path, url: str, body: bytes) -> str:
    (tmp_path / KEY_FILENAME).write_bytes(KEY)
    (tmp_path / "body").write_bytes(body)
    args = ["explain", "--method", "POST", "--url", url, "--body", str(tmp_path / "body")]
    for name, value in HEADERS:
        args += ["--header", f"{name}: {value}"]
    args += ["--json", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(cli.main, args, catch_exceptions=False)
    return str(json.loads(result.stdout)["key"])


def imported(url: str, body: bytes) -> str:
    flow = request("POST", url, body, HEADERS)
    captured = Captured(
        method="POST",
        scheme="https",
        host=flow.request.host,
        port=flow.request.port,
        path=flow.request.path,
        http_version="HTTP/1.1",
        request_headers=flow.request.headers.fields,
        request_body=body,
        started_at=0.0,
        duration=None,
        response=None,
        outcome=Outcome.FAILED,
        error="imported",
    )
    return Keeper("imported", Redactor(KEY), KeyConfig()).imported(captured).exchange.key


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [SMALL, BOMB], ids=["gzip", "gzip-past-the-limit"])
async def test_every_reader_keys_a_compressed_request_as_the_proxy_did(
    store: Store, tmp_path: Path, upstream: Upstream, upstream_ca: trustme.CA, body: bytes
) -> None:
    url = f"{upstream.base_url}/tool/counter"
    exchange = await recorded(store, url, body)
    verify = ssl.create_default_context()
    upstream_ca.configure_trust(verify)

    assert canonicalize(stored_view(exchange), KeyConfig()).key == exchange.recorded.key  # rekey
    assert explained(tmp_path, url, body) == exchange.recorded.key
    assert imported(url, body) == exchange.recorded.key
    again = resend(
        store,
        exchange,
        "again",
        sets=(),
        headers=(("authorization", "Bearer sk-resent-0123456789abcdef"),),
        redactor=Redactor(KEY),
        config=KeyConfig(),
        verify=verify,
        proxy=None,
    )
    assert store.exchange("again", again.seq).recorded.key == exchange.recorded.key


def test_a_body_that_does_not_decode_is_keyed_by_its_bytes() -> None:
    damaged = SMALL[:-8] + b"garbage!"
    wire = WireRequest(
        "POST", "https", "api.example.com", 443, "/", ((b"content-encoding", b"gzip"),), damaged
    )
    assert wire.view().body == damaged
    assert WireRequest("POST", "https", "h", 443, "/", wire.headers, SMALL).view().body == (
        gzip.decompress(SMALL)
    )
