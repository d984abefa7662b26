"""Several proxy processes recording one cassette into one store, as replicas behind one name.

The database decides every position and the chain, so every exchange a client got an answer
for is stored once, the seqs have no gap and no repeat, and the chain verifies.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

REPLICAS = 3
CLIENTS = 4
REQUESTS = 8


def drive(proxy: ProxyProcess, base: str, client: int, answers: list[int]) -> None:
    """One client of one replica: REQUESTS tool calls, each body its own."""
    url = f"{base}/tool/counter"
    bundle = proxy.data_dir / "ca-bundle.pem"  # written by the proxy as it started
    trusted = ssl.create_default_context(cafile=str(bundle))
    with httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=30) as http:
        for n in range(REQUESTS):
            body = {"replica": proxy.port, "client": client, "n": n}
            answered = http.post(url, json=body)
            answered.raise_for_status()
            answers.append(n)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_replicas_recording_one_cassette_keep_every_exchange_once_in_one_chain(
    backend: str,
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    store = (
        f"sqlite:///{tmp_path / 'shared.db'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    proxies = [
        start_proxy(mode="record", cassette="shared", store=store, data_dir=tmp_path / f"r{n}")
        for n in range(REPLICAS)
    ]
    answers: list[int] = []
    threads = []
    for proxy in proxies:
        for client in range(CLIENTS):
            thread = threading.Thread(
                target=drive, args=(proxy, upstream.base_url, client, answers)
            )
            thread.start()
            threads.append(thread)
    for thread in threads:
        thread.join(timeout=120)
    for proxy in proxies:
        assert proxy.stop() == 0
    assert len(answers) == REPLICAS * CLIENTS * REQUESTS, "every client got its answers"

    with open_store(store) as opened:
        rows = opened.exchanges("shared")
        assert [row.seq for row in rows] == list(range(REPLICAS * CLIENTS * REQUESTS))
        sent = set()
        for row in rows:
            body = json.loads(opened.exchange("shared", row.seq).recorded.request_body)
            sent.add((body["replica"], body["client"], body["n"]))
        assert len(sent) == len(rows), "no exchange stored twice"
        report = opened.verify("shared")
        assert report.ok, report.detail
    logs = "".join(proxy.log for proxy in proxies)
    assert "dropping it" not in logs and "duplicate key" not in logs


@pytest.mark.postgres
def test_replicas_sharing_a_replay_session_serve_each_recording_once_in_order(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    tmp_path: Path,
    postgres_url: str,
) -> None:
    recorder = start_proxy(mode="record", cassette="polls", store=postgres_url)
    answers = [poll(recorder, upstream) for _ in range(3)]
    recorder.stop()
    assert answers == [1, 2, 3]

    session = ("--replay-session", "ci-run-7")
    a = start_proxy(mode="replay", cassette="polls", store=postgres_url, args=session,
                    data_dir=tmp_path / "a")  # fmt: skip
    b = start_proxy(mode="replay", cassette="polls", store=postgres_url, args=session,
                    data_dir=tmp_path / "b")  # fmt: skip
    assert [poll(a, upstream), poll(b, upstream), poll(a, upstream)] == [1, 2, 3]
    assert poll(b, upstream) is None, "every recording was served once: a miss"
    assert a.admin("POST", "/api/replay/reset").status_code == 200
    assert poll(b, upstream) == 1, "a reset on one replica starts the session over for all"

    alone = start_proxy(mode="replay", cassette="polls", store=postgres_url,
                        data_dir=tmp_path / "c")  # fmt: skip
    assert poll(alone, upstream) == 1, "a replay of its own counts on its own"
    assert upstream.connections == 3


def poll(proxy: ProxyProcess, upstream: Upstream) -> int | None:
    """The tool's count for an identical request, or None for a replay miss."""
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    with httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=30) as http:
        answer = http.get(f"{upstream.base_url}/tool/counter", params={"q": "status"})
    return None if answer.status_code == 404 else int(answer.json()["count"])
