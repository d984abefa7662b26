"""Garbage collection: what no cassette uses goes, what may still be on its way stays."""

from __future__ import annotations

import time

from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import Store
from freezeframe.storage.blobs import compress, digest


def orphan(store_url: str, data: bytes, stored_at: float | None) -> None:
    """A body no exchange names, as a failed import or a lost exchange leaves one."""
    run_sql(
        store_url,
        "INSERT INTO blobs (digest, size, stored_size, data, parts, stored_at) "
        "VALUES (:digest, :size, :stored_size, :data, 0, :stored_at)",
        digest=digest(data),
        size=len(data),
        stored_size=len(compress(data)),
        data=compress(data),
        stored_at=stored_at,
    )


def test_gc_removes_unused_bodies_older_than_the_grace_and_keeps_the_rest(
    store: Store, store_url: str
) -> None:
    store.submit(
        plausible_exchange(
            store.reserve("kept", "k"), cassette="kept", response=plausible_response(body=b"used")
        )
    )
    store.flush(10)
    orphan(store_url, b"left by a failed import", time.time() - 7200)
    orphan(store_url, b"from before schema 5", None)
    orphan(store_url, b"an exchange may still name me", time.time())
    before = run_sql(store_url, "SELECT count(*) FROM blobs")[0][0]

    counted = store.collect(3600, dry_run=True)
    assert (counted.bodies, counted.values) == (2, 0) and counted.freed > 0
    assert run_sql(store_url, "SELECT count(*) FROM blobs")[0][0] == before, "a dry run"

    collected = store.collect(3600)
    assert collected == counted
    assert run_sql(store_url, "SELECT count(*) FROM blobs")[0][0] == before - 2
    assert store.exchange("kept", 0).recorded.response.body == b"used"  # type: ignore[union-attr]
    assert store.verify("kept").ok
    assert store.collect(0).bodies == 1, "with no grace, the young one goes too"
