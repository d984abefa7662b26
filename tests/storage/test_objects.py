"""Bodies in object storage (--blobs): a real SeaweedFS behind a real SQLite or PostgreSQL
store. The SQL store keeps no body bytes; every reader gets the bodies back from the bucket."""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response
from support.objectstore import SeaweedFS

from freezeframe.storage import BlobRef, Exchange, NewExchange, Store, open_store
from freezeframe.storage.blobs import digest
from freezeframe.storage.objects import MULTIPART_SIZE, BlobsUnavailable, outbox_for

WAIT = 10.0  # seconds; every wait in this file is bounded by it


def record(store: Store, *, key: str, body: bytes, **changes: Any) -> NewExchange:
    """Reserve a slot in cassette ``c``, submit an exchange answered with ``body``."""
    slot = store.reserve("c", key)
    exchange = plausible_exchange(
        slot,
        key=key,
        started_at=1_700_000_000.0 + slot.seq,
        response=plausible_response(body=body),
        **changes,
    )
    store.submit(exchange)
    return exchange


def assert_same(got: Exchange | None, sent: NewExchange) -> None:
    assert got is not None
    for field in dataclasses.fields(NewExchange):
        if field.name not in {"slot", "signals", "to_read"}:
            assert getattr(got.recorded, field.name) == getattr(sent, field.name), field.name


def body_bytes(store_url: str) -> int:
    """How many bytes of bodies the SQL store holds."""
    rows = run_sql(
        store_url,
        "SELECT coalesce(sum(length(data)), 0) FROM blobs",
    )
    return int(rows[0][0])


def test_bodies_go_to_the_bucket_once_and_come_back(
    store_url: str, blobs_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    bucket = blobs_url.removeprefix("s3://").split("/")[0]
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        first = record(store, key="a", body=b"the same answer" * 100)
        again = record(store, key="a", body=b"the same answer" * 100)
        other = record(store, key="b", body=os.urandom(5000))
        store.flush(WAIT)
        for sent in (first, again, other):
            assert_same(store.lookup("c", sent.key, sent.slot.occurrence), sent)
        assert store.verify("c").ok
    assert body_bytes(store_url) == 0, "the SQL store holds no body bytes"
    objects = seaweedfs.objects(bucket)
    assert all(key.startswith("bodies/") for key in objects)
    for key, data in objects.items():
        assert digest(data) == key.removeprefix("bodies/")
    assert b"the same answer" * 100 in objects.values()
    names = [key for key, data in objects.items() if data == b"the same answer" * 100]
    assert len(names) == 1, "an identical body is one object"

    # Another process (a CLI command) reads them back from the bucket alone.
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "other") as store:
        assert_same(store.lookup("c", "b", 0), other)
        assert store.verify("c").ok


def test_a_store_opened_without_blobs_says_what_it_needs(
    store_url: str, blobs_url: str, tmp_path: Path
) -> None:
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        record(store, key="a", body=b"kept in the bucket")
        store.flush(WAIT)
    with open_store(store_url) as store, pytest.raises(Exception, match="--blobs URL"):
        store.lookup("c", "a", 0)


def test_verify_reads_every_body_back(
    store_url: str, blobs_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    bucket = blobs_url.removeprefix("s3://").split("/")[0]
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        sent = record(store, key="a", body=b"soon changed behind the store's back")
        store.flush(WAIT)
        assert store.verify("c").ok
    name = digest(sent.response.body if sent.response else b"")
    seaweedfs.client().put_object(Bucket=bucket, Key=f"bodies/{name}", Body=b"tampered")
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        report = store.verify("c")
    assert not report.ok
    assert "does not match its digest" in (report.detail or "")


def test_a_large_body_is_uploaded_in_parts_and_read_by_ranges(
    store_url: str, blobs_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    large = os.urandom(MULTIPART_SIZE * 2 + 12345)
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        writer = store.blob_writer()
        for start in range(0, len(large), 1 << 20):
            writer.write(large[start : start + (1 << 20)])
        ref = writer.finish()
        assert ref == BlobRef(digest(large), len(large))
        slot = store.reserve("c", "big")
        response = plausible_response(body=b"", body_ref=ref)
        store.submit(plausible_exchange(slot, key="big", response=response))
        store.flush(WAIT)
        found = store.lookup("c", "big", 0)
        assert found is not None and found.recorded.response is not None
        assert found.recorded.response.body_ref == ref
        assert b"".join(store.read_blob(ref)) == large
        assert store.verify("c").ok
    assert body_bytes(store_url) == 0
    bucket = blobs_url.removeprefix("s3://").split("/")[0]
    client = seaweedfs.client()
    head = client.head_object(Bucket=bucket, Key=f"bodies/{ref.digest}")
    assert head["ContentLength"] == len(large)
    first = client.head_object(Bucket=bucket, Key=f"bodies/{ref.digest}", PartNumber=1)
    assert first["ContentLength"] == MULTIPART_SIZE, "uploaded in parts of MULTIPART_SIZE"


def test_while_the_bucket_is_away_bodies_wait_in_the_outbox(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SeaweedFS is stopped while recording: every exchange is still stored, its body in the
    outbox (and readable from there); health says so; once SeaweedFS is back the outbox
    empties into the bucket, and nothing acknowledged is lost."""
    server = SeaweedFS(tmp_path / "weed")
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc).splitlines()[0])
    try:
        bucket = server.bucket()
        url = f"s3://{bucket}/bodies"
        with open_store(store_url, blobs=url, outbox=tmp_path / "outbox") as store:
            before = record(store, key="a", body=b"before")
            store.flush(WAIT)
            server.stop()
            during = [record(store, key="b", body=f"during {n}".encode()) for n in range(3)]
            store.flush(WAIT * 3)
            assert [e.seq for e in store.exchanges("c")] == [0, 1, 2, 3]
            problem = store.health()
            assert problem is not None and "outbox" in problem
            waiting = set(os.listdir(tmp_path / "outbox"))
            assert {digest(f"during {n}".encode()) for n in range(3)} <= waiting
            server.start()
            # The store's own outbox thread finds the bucket back and empties into it.
            deadline = time.monotonic() + 60
            while os.listdir(tmp_path / "outbox"):
                assert time.monotonic() < deadline, "the outbox never emptied"
                time.sleep(0.2)
            assert store.health() is None
            assert store.verify("c").ok
            for sent in during:
                assert_same(store.lookup("c", "b", sent.slot.occurrence), sent)
        kept = set(server.objects(bucket).values())
        assert {b"before", b"during 0", b"during 1", b"during 2"} <= kept
        with open_store(store_url, blobs=url, outbox=tmp_path / "elsewhere") as store:
            for sent in (before, *during):
                assert_same(store.lookup("c", sent.key, sent.slot.occurrence), sent)
    finally:
        server.kill()


def test_a_full_outbox_refuses_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing answers at the endpoint: the first body waits in the outbox, the one that
    would overfill it is refused, saying why, and the outbox keeps what it had."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    outbox = outbox_for("s3://nobody-home/x", tmp_path / "outbox", capacity=150)
    try:
        outbox.put(digest(b"x" * 100), b"x" * 100)
        assert outbox.problem is not None
        with pytest.raises(BlobsUnavailable, match="outbox .* is full") as refused:
            outbox.put(digest(b"y" * 100), b"y" * 100)
        assert "\n" not in str(refused.value)
        assert outbox.get(digest(b"x" * 100)) == b"x" * 100
        assert outbox.size() == 100
    finally:
        outbox.close(timeout=1)


def test_gc_removes_objects_nothing_names_only_after_the_grace(
    store_url: str, blobs_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    bucket = blobs_url.removeprefix("s3://").split("/")[0]
    stray = b"uploaded for an exchange that was never written"
    seaweedfs.client().put_object(Bucket=bucket, Key=f"bodies/{digest(stray)}", Body=stray)
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        sent = record(store, key="a", body=b"named by an exchange")
        store.flush(WAIT)
        assert store.collect(3600).objects == 0, "younger than the grace: kept"
        assert store.collect(0, dry_run=True).objects == 1
        assert digest(stray) in {k.split("/")[-1] for k in seaweedfs.objects(bucket)}
        assert store.collect(0).objects == 1
        kept = {k.split("/")[-1] for k in seaweedfs.objects(bucket)}
        assert digest(stray) not in kept
        assert digest(b"named by an exchange") in kept
        # The writer uploads again what the next exchange names after a collection.
        again = record(store, key="a", body=b"named by an exchange")
        store.flush(WAIT)
        for exchange in (sent, again):
            assert_same(store.lookup("c", "a", exchange.slot.occurrence), exchange)
        assert store.verify("c").ok


def test_bodies_move_into_object_storage_and_back(
    store_url: str, blobs_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    """A store recorded without --blobs (deltas, a streamed body) moves into the bucket and
    back; every exchange reads the same and the chain verifies at each step."""
    large = os.urandom(3 * (1 << 20) + 5)
    with open_store(store_url) as store:
        turns = [
            record(store, key="chat", body=b"turn", request_body=b"history " * 200 * (n + 1))
            for n in range(4)
        ]
        writer = store.blob_writer()
        writer.write(large)
        ref = writer.finish()
        slot = store.reserve("c", "big")
        store.submit(
            plausible_exchange(slot, key="big", response=plausible_response(body=b"", body_ref=ref))
        )
        store.flush(WAIT)
    assert body_bytes(store_url) > 0
    with open_store(store_url) as store:
        assert store.move_bodies(blobs_url) >= 6
    assert body_bytes(store_url) == 0
    assert run_sql(store_url, "SELECT count(*) FROM blob_parts")[0][0] == 0
    with open_store(store_url, blobs=blobs_url, outbox=tmp_path / "outbox") as store:
        for sent in turns:
            assert_same(store.lookup("c", "chat", sent.slot.occurrence), sent)
        assert b"".join(store.read_blob(ref)) == large
        assert store.verify("c").ok
        assert store.move_bodies("sql") >= 6
    assert body_bytes(store_url) > 0
    with open_store(store_url) as store:
        for sent in turns:
            assert_same(store.lookup("c", "chat", sent.slot.occurrence), sent)
        assert b"".join(store.read_blob(ref)) == large
        assert store.verify("c").ok
