"""Node's own ``fetch`` retrying a 421 through the proxy gets what it gets directly.

On 421 Misdirected Request, undici's ``fetch`` retries once on a new connection with the
same body, and aborts the first connection as it does. If the 421's head reaches it before
the body (mitmproxy encrypted the two in TLS records of their own), that abort also ends
the retry's body before its first byte: the retry went out with ``content-length: 0`` and
the client failed with ``RequestContentLengthMismatchError``, while directly, from a
server that writes a small answer at once, it gets a clean 421. Real Node, real proxy,
real TLS upstream.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corpus import node_project
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

SENT = {"task": "book a table", "for": 2}
"""The JSON body tests/node/misdirected.mjs posts."""


def node_fetch(url: str, env: dict[str, str], *, proxied: bool) -> dict[str, Any]:
    """What tests/node/misdirected.mjs got: ``{"status", "body"}`` or ``{"error", "cause"}``."""
    script = node_project() / "misdirected.mjs"
    command = ["node", str(script), url, *(["proxied"] if proxied else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def through(proxy: ProxyProcess) -> dict[str, str]:
    """An agent's environment pointed at ``proxy``; Node reads its CA from NODE_EXTRA_CA_CERTS."""
    return {
        **os.environ,
        **proxy.client_env(proxy.ca_path),
        "NODE_EXTRA_CA_CERTS": str(proxy.ca_path),
    }


def test_a_421_retried_by_node_fetch_is_clean_through_the_proxy_and_recorded_as_sent(
    upstream: Upstream,
    upstream_ca_file: Path,
    start_proxy: Callable[..., ProxyProcess],
) -> None:
    url = upstream.url("/misdirected")
    trusting_upstream = {**os.environ, "NODE_EXTRA_CA_CERTS": str(upstream_ca_file)}
    direct = node_fetch(url, trusting_upstream, proxied=False)
    assert direct["status"] == 421 and direct["body"]["n"] == 2, "directly: the retry's own 421"

    proxy = start_proxy(mode="record")
    recorded = node_fetch(url, through(proxy), proxied=True)
    assert recorded == {"status": 421, "body": {**direct["body"], "n": 4}}, recorded

    sent = [(r.method, r.header("content-length"), r.json()) for r in upstream.requests]
    length = str(len(json.dumps(SENT, separators=(",", ":"))))
    assert sent == [("POST", length, SENT)] * 4, "every attempt reached the server with its body"
    assert len(proxy.stored("default", 2)) == 2
    with open_store(f"sqlite:///{proxy.data_dir / 'freezeframe.db'}", create=False) as store:
        store.flush(10)
        exchanges = [store.exchange("default", seq) for seq in (0, 1)]
    for exchange in exchanges:
        headers = [(k.decode().lower(), v.decode()) for k, v in exchange.recorded.request_headers]
        assert ("content-length", length) in headers
        assert json.loads(exchange.recorded.request_body) == SENT
        assert exchange.recorded.response is not None and exchange.recorded.response.status == 421
    proxy.stop()

    replay = start_proxy(mode="replay")
    assert node_fetch(url, through(replay), proxied=True) == recorded, (
        "replay answers the retry as recorded"
    )
    assert len(upstream.requests) == 4, "replay reached no server"
