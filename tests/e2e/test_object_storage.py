"""Bodies in object storage through the real proxy: PostgreSQL holds the index, SeaweedFS
(a real object store, its S3 gateway) the bodies. Recorded, replayed byte for byte with the
upstream never asked; recorded through an outage of the object store under ``strict`` with
nothing acknowledged lost."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.database import run_sql
from support.objectstore import SeaweedFS
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store
from freezeframe.storage.blobs import digest

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
LARGE = 9 * 1024 * 1024
"""More than the 8 MiB spill: streamed through a blob writer, uploaded in parts."""


def freezeframe(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A freezeframe command, outside the proxy the test pointed this process at, in ``cwd``:
    given --store and not --data-dir, a command keeps its outbox in ./.freezeframe, which
    must not land in the checkout (test_hostile_names watches it)."""
    outside = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        env={**outside, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_recorded_into_postgresql_and_object_storage_and_replayed_byte_for_byte(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    postgres_url: str,
    blobs_url: str,
    seaweedfs: SeaweedFS,
    tmp_path: Path,
) -> None:
    env = {"FREEZEFRAME_BLOBS": blobs_url}
    recorder = start_proxy(mode="record", cassette="bucket", store=postgres_url, env=env)
    client_env(recorder)
    base = upstream.base_url
    with httpx.Client(timeout=60) as client:
        answers = [
            client.get(f"{base}/tool/counter", params={"n": "1"}).content,
            client.post(f"{base}/tool/counter", json={"n": 2, "pad": "x" * 5000}).content,
            client.get(f"{base}/bytes/random", params={"size": str(LARGE), "seed": "5"}).content,
        ]
    assert len(answers[2]) == LARGE
    assert recorder.stop() == 0
    assert upstream.connections >= 1
    asked = upstream.connections

    held = run_sql(postgres_url, "SELECT coalesce(sum(length(data)), 0) FROM blobs")[0][0]
    assert held == 0, "PostgreSQL holds no body bytes"
    assert run_sql(postgres_url, "SELECT count(*) FROM blob_parts")[0][0] == 0
    bucket = blobs_url.removeprefix("s3://").split("/")[0]
    objects = seaweedfs.objects(bucket)
    assert {digest(answer) for answer in answers} <= {k.split("/")[-1] for k in objects}

    replayer = start_proxy(
        mode="replay", cassette="bucket", store=postgres_url, env=env, data_dir=tmp_path / "r"
    )
    client_env(replayer)
    with httpx.Client(timeout=60) as client:
        replayed = [
            client.get(f"{base}/tool/counter", params={"n": "1"}).content,
            client.post(f"{base}/tool/counter", json={"n": 2, "pad": "x" * 5000}).content,
            client.get(f"{base}/bytes/random", params={"size": str(LARGE), "seed": "5"}).content,
        ]
    assert replayed == answers
    assert upstream.connections == asked, "replay never forwarded"
    assert replayer.stop() == 0

    verified = freezeframe(
        "verify", "bucket", "--store", postgres_url, "--blobs", blobs_url, env={}, cwd=tmp_path
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = freezeframe("show", "bucket", "--store", postgres_url, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "/tool/counter" in shown.stdout


def test_an_object_store_outage_under_strict_loses_nothing_acknowledged(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SeaweedFS is killed while an agent records: the proxy keeps answering, /health and
    /metrics say the object store is away and how much waits, and once it is back every
    answer the client received is stored, its body in the bucket."""
    server = SeaweedFS(tmp_path / "weed")
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    server.start()
    try:
        blobs_url = f"s3://{server.bucket()}/bodies"
        proxy = start_proxy(
            mode="record",
            cassette="away",
            store=postgres_url,
            env={"FREEZEFRAME_BLOBS": blobs_url, "FREEZEFRAME_DURABILITY": "strict"},
        )
        client_env(proxy)
        url = f"{upstream.base_url}/tool/counter"
        received = []
        with httpx.Client(timeout=60) as client:
            received.append(client.get(url, params={"n": "before"}).content)
            server.kill()
            for n in range(5):
                answer = client.get(url, params={"n": f"during-{n}"})
                assert answer.status_code == 200, "the agent never notices"
                received.append(answer.content)
            health = proxy.health(lambda h: h["store_problem"] is not None)
            assert health["status"] == "degraded"
            assert "outbox" in health["store_problem"]
            metrics = proxy.admin("GET", "/metrics").text
            waiting = [
                line for line in metrics.splitlines() if line.startswith("freezeframe_outbox_bytes")
            ]
            assert waiting and float(waiting[0].split()[-1]) > 0
            server.start()
            deadline = time.monotonic() + 60
            while proxy.admin("GET", "/health").json()["store_problem"] is not None:
                assert time.monotonic() < deadline, "the outbox never emptied"
                time.sleep(0.3)
            received.append(client.get(url, params={"n": "after"}).content)
        assert proxy.stop() == 0
        with open_store(postgres_url, blobs=blobs_url, outbox=tmp_path / "reader") as store:
            rows = store.exchanges("away")
            kept = [store.exchange("away", row.seq) for row in rows]
            assert [e.recorded.response.body for e in kept if e.recorded.response] == received
            assert store.verify("away").ok
        assert not (proxy.data_dir / "outbox").exists() or not os.listdir(proxy.data_dir / "outbox")
    finally:
        server.kill()
