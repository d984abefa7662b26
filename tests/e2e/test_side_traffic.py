"""Side traffic an SDK sends on its own replays, though its ids and clocks are new (#22).

The OpenAI Agents SDK exports its traces after a run, with trace and span ids and times
minted for that run; recorded, such a request would never match again and every replay
would miss it. The ``telemetry`` profile keys it without its body.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner
from support.corpus import send_side_traffic
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe import cli

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def test_a_trace_export_with_new_ids_replays_without_a_miss(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    send_side_traffic(upstream)
    recorder.stored("default", 1)
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    send_side_traffic(upstream)  # raises on the miss's 4xx
    assert upstream.connections == 0
    assert replayer.admin("GET", "/api/cassettes/default/misses").json() == []
    explained = CliRunner().invoke(
        cli.main,
        [
            "explain",
            "--method",
            "POST",
            "--url",
            upstream.url("/v1/traces/ingest"),
            "--header",
            "content-type: application/json",
            "--data-dir",
            str(recorder.data_dir),
            "--json",
        ],
        input="",
    )
    assert explained.exit_code == 0, explained.output
