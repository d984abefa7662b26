"""MCP over streamable HTTP: the JSON-RPC id is not the situation, but the answer must echo it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe import cli

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def call(
    base: str, request_id: Any, *, sse: bool, traceparent: str | None = None
) -> httpx.Response:
    params: dict[str, Any] = {"name": "lookup", "arguments": {"q": "cats"}}
    if traceparent:
        params["_meta"] = {"traceparent": traceparent}
    accept = "text/event-stream, application/json" if sse else "application/json"
    return httpx.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params},
        headers={"Accept": accept, "Mcp-Session-Id": f"session-{request_id}"},
        timeout=10,
    )


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_a_replayed_answer_carries_the_live_request_id(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    sse: bool,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = call(upstream.base_url, 1, sse=sse)
    assert b'"id":1' in recorded.content
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    replayed = call(upstream.base_url, "req-1234", sse=sse, traceparent="00-ab-cd-01")
    assert replayed.status_code == 200
    assert replayed.content == recorded.content.replace(b'"id":1', b'"id":"req-1234"', 1)
    if not sse:
        assert replayed.json()["id"] == "req-1234"
        assert int(replayed.headers["content-length"]) == len(replayed.content)
    assert upstream.connections == 0

    shown = CliRunner().invoke(
        cli.main, ["show", "default", "0", "--json", "--data-dir", str(recorder.data_dir)]
    )
    rewrites = json.loads(shown.stdout)["rewrites"]
    assert [r["header"] for r in rewrites] == ["body: JSON-RPC id"]
