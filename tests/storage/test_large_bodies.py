"""Bodies of any size: streamed in through a blob writer, out through read_blob,
with memory bounded by a part, on a real SQLite file and a real PostgreSQL database."""

import dataclasses
import gc
import logging
import os
import random
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import pytest
import sqlalchemy
from support.database import run_sql, writes_blocked
from support.exchanges import plausible_exchange, plausible_response
from support.schemas import V1, new_store_schema, schema_of

from freezeframe.storage import (
    BlobRef,
    Chunk,
    ExchangeFilter,
    Message,
    NewExchange,
    Rekeyed,
    Slot,
    Store,
    StoreClosed,
    StoreError,
    open_store,
)
from freezeframe.storage.blobs import INLINE_LIMIT, PART_SIZE, compress, digest
from freezeframe.storage.chain import GENESIS, exchange_digest, link
from freezeframe.storage.sql.migrations.versions.v2_blob_parts import add_blob_parts
from freezeframe.storage.sql.migrations.versions.v3_canonical_digest import add_canonical_digest
from freezeframe.storage.sql.migrations.versions.v4_facts_and_drift import add_facts_and_drift
from freezeframe.storage.sql.migrations.versions.v5_search_and_misses import (
    add_search_and_misses,
)
from freezeframe.storage.sql.migrations.versions.v6_blob_bases import add_blob_bases
from freezeframe.storage.sql.migrations.versions.v7_run_index_and_compact_search import (
    index_runs_and_compact_search,
)
from freezeframe.storage.sql.migrations.versions.v8_signals_and_notes import add_signals_and_notes
from freezeframe.storage.sql.rows import exchange_row
from freezeframe.storage.sql.schema import SCHEMA_VERSION
from freezeframe.storage.sql.versioning import HEAD

WAIT = 30.0
NOT_A_FORM = (
    "digest NOT IN (SELECT canonical_digest FROM exchanges WHERE canonical_digest IS NOT NULL)"
)
"""SQL: a blob that holds a body, not a canonical form."""
MiB = 1024 * 1024
WRITE_SIZE = 64 * 1024


def chunks(size: int, seed: int = 1) -> Iterator[bytes]:
    """``size`` bytes in writes of WRITE_SIZE: random runs (which do not compress)
    between repetitive ones, never all held at once."""
    rng = random.Random(seed)
    for offset in range(0, size, WRITE_SIZE):
        n = min(WRITE_SIZE, size - offset)
        if (offset // WRITE_SIZE) % 4 == 3:
            yield (b"%016x" % offset) * (n // 16) + b"." * (n % 16)
        else:
            yield rng.randbytes(n)


def expected(size: int, seed: int = 1) -> BlobRef:
    hasher = blake3.blake3()
    for chunk in chunks(size, seed):
        hasher.update(chunk)
    return BlobRef(hasher.hexdigest(), size)


def stream_in(store: Store, size: int, seed: int = 1) -> BlobRef:
    writer = store.blob_writer()
    for chunk in chunks(size, seed):
        writer.write(chunk)
    return writer.finish()


def read_back(store: Store, ref: BlobRef) -> BlobRef:
    """What read_blob yields, as a reference, checking that no piece exceeds a part."""
    hasher, size = blake3.blake3(), 0
    for piece in store.read_blob(ref):
        assert 0 < len(piece) <= PART_SIZE
        hasher.update(piece)
        size += len(piece)
    return BlobRef(hasher.hexdigest(), size)


def download(
    slot: Slot,
    key: str,
    *,
    body: bytes = b"",
    body_ref: BlobRef | None = None,
    request_body: bytes = b"",
    request_body_ref: BlobRef | None = None,
    cassette: str = "c",
) -> NewExchange:
    """A download whose bodies are given as bytes or by reference."""
    return plausible_exchange(
        slot,
        cassette=cassette,
        key=key,
        canonical=b"GET /download " + key.encode(),
        method="GET",
        host="files.example.com",
        path="/download",
        request_headers=((b"host", b"files.example.com"),),
        request_body=request_body,
        request_body_ref=request_body_ref,
        duration=3.5,
        response=plausible_response(
            headers=((b"content-type", b"application/octet-stream"),),
            body=body,
            body_ref=body_ref,
            chunks=(Chunk(0, 0.1),),
            first_byte_at=0.1,
        ),
        context={},
    )


def submit(store: Store, key: str, *, cassette: str = "c", **bodies: Any) -> NewExchange:
    """Reserve a slot, submit a download in it, return what was submitted."""
    exchange = download(store.reserve(cassette, key), key, cassette=cassette, **bodies)
    store.submit(exchange)
    return exchange


def spool_files(directory: Path) -> list[str]:
    """This process's open files in ``directory``: spools, even unnamed ones."""
    if not sys.platform.startswith("linux"):
        return []
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory spools go to for this test."""
    directory = tmp_path / "spool"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


# -- streaming in and out ------------------------------------------------------------


def test_a_64_mib_body_streams_through_with_flat_memory(
    store: Store, store_url: str, spool_dir: Path
) -> None:
    size = 64 * MiB
    want = expected(size)
    gc.collect()
    tracemalloc.start()
    try:
        ref = stream_in(store, size)
        submit(store, "big", body_ref=ref, request_body_ref=ref)
        store.flush(WAIT)
        found = store.lookup("c", "big", 0)
        got = read_back(store, ref)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"tracemalloc peak for a {size // MiB} MiB body: {peak / MiB:.2f} MiB")

    assert ref == want
    assert got == want
    assert peak < 16 * MiB
    assert found is not None and found.recorded.response is not None
    assert (found.recorded.response.body, found.recorded.response.body_ref) == (b"", ref)
    assert (found.recorded.request_body, found.recorded.request_body_ref) == (b"", ref)
    assert store.exchange("c", 0).recorded.response == found.recorded.response
    assert store.exchanges("c")[0].response_bytes == size
    [(parts, data_size, stored_size)] = run_sql(
        store_url, f"SELECT parts, length(data), stored_size FROM blobs WHERE {NOT_A_FORM}"
    )
    assert (parts, data_size) == (size // PART_SIZE, 0)
    [(count, total)] = run_sql(store_url, "SELECT count(*), sum(length(data)) FROM blob_parts")
    assert (count, total) == (parts, stored_size)
    assert stored_size < size  # the repetitive quarter compresses
    assert store.verify("c").ok
    assert spool_files(spool_dir) == []


def test_a_large_body_given_as_bytes_is_read_back_by_reference(store: Store) -> None:
    body = b"".join(chunks(INLINE_LIMIT + 1, seed=2))
    submit(store, "inline", body=body)
    store.flush(WAIT)
    found = store.lookup("c", "inline", 0)
    assert found is not None and found.recorded.response is not None
    assert found.recorded.response.body == b""
    assert found.recorded.response.body_ref == BlobRef(digest(body), len(body))
    assert read_back(store, found.recorded.response.body_ref) == found.recorded.response.body_ref


def test_streamed_bodies_up_to_the_inline_limit_are_loaded(store: Store) -> None:
    small = stream_in(store, 2 * MiB + 5, seed=3)  # three parts
    single = stream_in(store, 1000, seed=4)  # one part
    empty = store.blob_writer().finish()
    submit(store, "k", body_ref=small, request_body_ref=single)
    submit(store, "empty", body_ref=empty, request_body_ref=empty)

    found = store.lookup("c", "k", 0)  # waits for the writer; no flush
    assert found is not None and found.recorded.response is not None
    assert found.recorded.response.body_ref is None and found.recorded.request_body_ref is None
    assert found.recorded.response.body == b"".join(chunks(2 * MiB + 5, seed=3))
    assert found.recorded.request_body == b"".join(chunks(1000, seed=4))
    assert store.exchanges("c")[0].response_bytes == 2 * MiB + 5

    nothing = store.lookup("c", "empty", 0)
    assert nothing is not None and nothing.recorded.response is not None
    assert (nothing.recorded.response.body, nothing.recorded.response.body_ref) == (b"", None)
    assert (nothing.recorded.request_body, nothing.recorded.request_body_ref) == (b"", None)
    assert empty == BlobRef(digest(b""), 0)
    assert list(store.read_blob(empty)) == []
    assert store.verify("c").ok


def test_read_blob_waits_for_a_body_still_queued(store: Store) -> None:
    ref = stream_in(store, 3 * MiB, seed=5)
    assert read_back(store, ref) == ref  # no flush in between


def test_the_same_large_body_is_stored_once(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    size = 3 * MiB + 17
    first, second = stream_in(store, size, seed=6), stream_in(store, size, seed=6)
    assert first == second
    submit(store, "a", body_ref=first)
    submit(store, "b", body_ref=second)
    submit(store, "a", cassette="other", body_ref=first)
    submit(store, "inline", body=b"".join(chunks(size, seed=6)))  # the same, as bytes
    store.flush(WAIT)

    [(count, parts, stored_size)] = run_sql(
        store_url, f"SELECT count(*), sum(parts), sum(stored_size) FROM blobs WHERE {NOT_A_FORM}"
    )
    assert (count, parts) == (1, 4)
    [(part_rows,)] = run_sql(store_url, "SELECT count(*) FROM blob_parts")
    assert part_rows == 4
    sizes = {summary.name: summary.stored_bytes for summary in store.cassettes()}
    assert sizes == {"c": stored_size, "other": stored_size}
    inline = store.lookup("c", "inline", 0)
    assert inline is not None and inline.recorded.response is not None
    assert inline.recorded.response.body == b"".join(chunks(size, seed=6))
    assert store.verify("c").ok
    assert caplog.records == []  # the second copy was skipped, not refused


# -- the writer's life ---------------------------------------------------------------


def test_finish_and_abort_are_idempotent(store: Store, spool_dir: Path) -> None:
    writer = store.blob_writer()
    writer.write(b"x" * (PART_SIZE + 1))
    ref = writer.finish()
    assert writer.finish() == ref
    writer.abort()  # too late: the body is the store's now
    assert writer.finish() == ref
    with pytest.raises(StoreError, match="finished"):
        writer.write(b"more")
    assert read_back(store, ref) == BlobRef(digest(b"x" * (PART_SIZE + 1)), PART_SIZE + 1)

    aborted = store.blob_writer()
    aborted.write(b"y" * (3 * PART_SIZE))
    assert len(spool_files(spool_dir)) == (1 if sys.platform.startswith("linux") else 0)
    aborted.abort()
    aborted.abort()
    assert spool_files(spool_dir) == []
    assert os.listdir(spool_dir) == []
    with pytest.raises(StoreError, match="aborted"):
        aborted.write(b"y")
    with pytest.raises(StoreError, match="aborted"):
        aborted.finish()


def test_close_aborts_unfinished_writers_and_writes_finished_ones(
    store: Store, store_url: str, spool_dir: Path
) -> None:
    unfinished = store.blob_writer()
    unfinished.write(b"u" * (2 * PART_SIZE + 3))
    finished = store.blob_writer()
    for chunk in chunks(4 * MiB, seed=7):
        finished.write(chunk)
    ref = finished.finish()
    submit(store, "k", body_ref=ref)
    store.close()

    assert spool_files(spool_dir) == []
    assert os.listdir(spool_dir) == []
    with pytest.raises(StoreClosed):
        unfinished.write(b"u")
    with pytest.raises(StoreClosed):
        unfinished.finish()
    with pytest.raises(StoreClosed):
        store.blob_writer()
    with open_store(store_url) as reopened:
        found = reopened.lookup("c", "k", 0)
        assert found is not None and found.recorded.response is not None
        assert digest(found.recorded.response.body) == ref.digest
        assert reopened.verify("c").ok


def test_a_writer_dropped_unfinished_closes_its_spool(store: Store, spool_dir: Path) -> None:
    writer = store.blob_writer()
    writer.write(b"d" * (2 * PART_SIZE))
    del writer
    gc.collect()
    assert spool_files(spool_dir) == []


@pytest.mark.parametrize(
    "case",
    ["a body the store does not have", "a body given both as bytes and by reference"],
)
def test_an_exchange_with_a_bad_body_reference_is_dropped(
    store: Store, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    if case == "a body the store does not have":
        submit(store, "k", body_ref=BlobRef(digest(b"never written"), 13))
    else:
        submit(store, "k", body=b"bytes", body_ref=BlobRef(digest(b"bytes"), 5))
    submit(store, "fine", body=b"fine")
    store.flush(WAIT)
    assert store.count("c", "k") == 0
    assert [summary.key for summary in store.exchanges("c")] == ["fine"]
    assert store.verify("c").ok
    assert any("dropping it" in record.getMessage() for record in caplog.records)


# -- verify and damage ---------------------------------------------------------------


@pytest.mark.parametrize("damage", ["a flipped byte", "a deleted part"])
def test_verify_rehashes_streamed_bodies_and_finds_a_damaged_part(
    store: Store, store_url: str, damage: str
) -> None:
    submit(store, "before", body=b"small")
    ref = stream_in(store, 20 * MiB, seed=8)
    submit(store, "big", body_ref=ref)
    store.flush(WAIT)
    report = store.verify("c")
    assert (report.ok, report.checked) == (True, 2)

    where = "digest = :digest AND idx = 3"
    if damage == "a flipped byte":
        [(data,)] = run_sql(
            store_url, f"SELECT data FROM blob_parts WHERE {where}", digest=ref.digest
        )
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0x01
        run_sql(
            store_url,
            f"UPDATE blob_parts SET data = :data WHERE {where}",
            digest=ref.digest,
            data=bytes(flipped),
        )
        problem = "part 3 cannot be decompressed"
    else:
        run_sql(store_url, f"DELETE FROM blob_parts WHERE {where}", digest=ref.digest)
        problem = "part 3 is missing"

    report = store.verify("c")
    assert (report.ok, report.first_break, report.checked) == (False, 1, 1)
    assert report.detail == f"exchange 1: its response body {ref.digest[:16]} {problem}"
    with pytest.raises(StoreError, match=f"body {ref.digest[:16]} {problem}, in store "):
        read_back(store, ref)


def test_verify_notices_parts_that_are_intact_but_not_the_body(
    store: Store, store_url: str
) -> None:
    ref = stream_in(store, 3 * MiB, seed=9)
    other = stream_in(store, 3 * MiB, seed=10)
    submit(store, "k", body_ref=ref)
    store.flush(WAIT)
    run_sql(
        store_url,
        "UPDATE blob_parts SET data = (SELECT data FROM blob_parts WHERE digest = :other "
        "AND idx = 0) WHERE digest = :digest AND idx = 0",
        digest=ref.digest,
        other=other.digest,
    )
    report = store.verify("c")
    assert not report.ok
    assert (
        report.detail
        == f"exchange 0: its response body {ref.digest[:16]} does not match its digest"
    )
    with pytest.raises(StoreError, match="read back does not match its digest and size"):
        read_back(store, ref)


# -- version 1 stores ----------------------------------------------------------------

V1_COLUMNS = frozenset(V1.tables["exchanges"].c.keys())
V1_CHAINED = V1_COLUMNS - {"id", "cassette_id", "chain"}
"""What the chain covered up to version 3, frozen here so that these stores are chained
as those versions chained them, whatever the code does now."""


def v1_link(previous: str, row: dict[str, Any], form: bytes | None = None) -> str:
    """The chain value versions 1 to 3 gave ``row`` (an exchange_row) of cassette "c"."""
    fields = {name: row[name] for name in V1_CHAINED} | {"cassette": "c"}
    if form is not None:
        fields["canonical"] = form
    return link(previous, exchange_digest(fields))


def v1_store(url: str, sent: list[NewExchange]) -> None:
    """A version-1 store holding ``sent``, written as version 1 wrote it."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = sqlalchemy.create_engine(url)
    tables = V1.tables
    try:
        with engine.begin() as conn:
            V1.create_all(conn)
            conn.execute(tables["meta"].insert().values(name="schema_version", value="1"))
            conn.execute(
                tables["cassettes"].insert().values(id=1, name="c", created_at=1.0, head=GENESIS)
            )
            head = GENESIS
            for exchange in sent:
                names = []
                assert exchange.response is not None
                for body in (exchange.request_body, exchange.response.body):
                    names.append(digest(body) if body else None)
                    if (
                        body
                        and not conn.execute(
                            tables["blobs"].select().where(tables["blobs"].c.digest == digest(body))
                        ).first()
                    ):
                        stored = compress(body)
                        conn.execute(
                            tables["blobs"]
                            .insert()
                            .values(
                                digest=digest(body),
                                size=len(body),
                                stored_size=len(stored),
                                data=stored,
                            )
                        )
                row = exchange_row(exchange, 1, names[0], names[1])
                head = v1_link(head, row)
                v1_row = {name: value for name, value in row.items() if name in V1_COLUMNS}
                conn.execute(tables["exchanges"].insert().values(v1_row | {"chain": head}))
            conn.execute(tables["cassettes"].update().values(head=head))
    finally:
        engine.dispose()


def test_a_version_1_store_is_migrated_when_opened(store_url: str) -> None:
    big = b"".join(chunks(INLINE_LIMIT + 5, seed=11))
    v1_store(
        store_url,
        [
            download(Slot(0, 0), "k0", body=b"answer", request_body=b'{"q": 1}'),
            download(Slot(1, 0), "k1", body=big, request_body=b'{"q": 1}'),
        ],
    )

    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        assert run_sql(store_url, "SELECT parts FROM blobs ORDER BY size") == [(0,), (0,), (0,)]
        assert store.verify("c").ok
        old = store.lookup("c", "k0", 0)
        assert old is not None and old.recorded.response is not None
        assert (old.recorded.request_body, old.recorded.response.body) == (b'{"q": 1}', b"answer")
        assert old.chain == run_sql(store_url, "SELECT chain FROM exchanges WHERE seq = 0")[0][0]
        large = store.lookup("c", "k1", 0)
        assert large is not None and large.recorded.response is not None
        assert large.recorded.response.body_ref == BlobRef(digest(big), len(big))
        assert (
            read_back(store, large.recorded.response.body_ref) == large.recorded.response.body_ref
        )

        ref = stream_in(store, 3 * MiB, seed=12)
        submit(store, "k2", body_ref=ref)
        store.flush(WAIT)
        assert store.reserve("c", "k3") == Slot(3, 0)
        report = store.verify("c")
        assert (report.ok, report.checked) == (True, 3)

    with open_store(store_url) as reopened:  # already version 4: nothing to do
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        assert reopened.verify("c").ok


def test_a_migration_cut_short_runs_again(store_url: str) -> None:
    """The column was added but the version not yet raised: opening finishes the job."""
    open_store(store_url).close()
    run_sql(store_url, "DROP TABLE blob_parts")
    run_sql(store_url, "UPDATE meta SET value = '1'")
    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        ref = stream_in(store, 2 * MiB + 1, seed=13)
        assert read_back(store, ref) == ref


def v2_store(url: str, sent: list[NewExchange]) -> None:
    """A version-2 store holding ``sent``: canonical forms kept whole in exchanges.canonical."""
    v1_store(url, sent)
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            add_blob_parts(conn)  # 1 -> 2, as version 2 ran it
            conn.execute(sqlalchemy.text("UPDATE meta SET value = '2'"))
    finally:
        engine.dispose()


def test_a_version_2_store_keeps_its_canonical_forms_and_chain(store_url: str) -> None:
    """Rows written before version 3 hold their form themselves, and are read as they are."""
    old = [
        download(Slot(0, 0), "k0", body=b"answer 0", request_body=b'{"q": 0}'),
        download(Slot(1, 0), "k1", body=b"answer 1", request_body=b'{"q": 1}'),
    ]
    v2_store(store_url, old)

    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        for exchange in old:
            found = store.lookup("c", exchange.key, 0)
            assert found is not None and found.recorded.canonical == exchange.canonical
            assert store.exchange("c", exchange.slot.seq).recorded.canonical == exchange.canonical
        new = submit(store, "k2", body=b"answer 2")
        submit(store, "k0", body=b"answer 0 again")
        store.flush(WAIT)
        candidates = store.candidates("c", "GET", "files.example.com", "/download")
        assert [c.canonical for c in candidates] == [
            b"GET /download k0",
            b"GET /download k1",
            b"GET /download k2",
            b"GET /download k0",
        ]
        found = store.lookup("c", "k2", 0)
        assert found is not None and found.recorded.canonical == new.canonical
        report = store.verify("c")
        assert (report.ok, report.checked) == (True, 4)

    rows = run_sql(store_url, "SELECT seq, canonical, canonical_digest FROM exchanges ORDER BY seq")
    assert [(seq, bytes(form), name) for seq, form, name in rows] == [
        (0, b"GET /download k0", None),
        (1, b"GET /download k1", None),
        (2, b"", digest(b"GET /download k2")),
        (3, b"", digest(b"GET /download k0")),
    ]
    with open_store(store_url) as reopened:
        assert reopened.verify("c").ok


def test_a_migration_to_version_3_cut_short_runs_again(store_url: str) -> None:
    """The column was added but the version not yet raised: opening finishes the job."""
    with open_store(store_url) as store:
        submit(store, "k0", body=b"answer")
    run_sql(store_url, "UPDATE meta SET value = '2'")
    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        found = store.lookup("c", "k0", 0)
        assert found is not None and found.recorded.canonical == b"GET /download k0"
        assert store.verify("c").ok


# -- version 3 stores ----------------------------------------------------------------


def v3_store(url: str, old: list[NewExchange], new: list[NewExchange]) -> None:
    """A version-3 store: ``old`` written by version 1 (forms kept in exchanges.canonical),
    then migrated as versions 2 and 3 ran it, then ``new`` written as version 3 wrote
    them (forms as blobs)."""
    v2_store(url, old)
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            add_canonical_digest(conn)  # 2 -> 3, as version 3 ran it
            conn.execute(sqlalchemy.text("UPDATE meta SET value = '3'"))
            tables = sqlalchemy.MetaData()
            tables.reflect(conn, only=["blobs", "exchanges", "cassettes"])
            blob_table, exchange_table = tables.tables["blobs"], tables.tables["exchanges"]
            head = conn.scalar(sqlalchemy.text("SELECT head FROM cassettes"))
            for exchange in new:
                assert exchange.response is not None
                names = []
                for data in (exchange.request_body, exchange.response.body, exchange.canonical):
                    name = digest(data)
                    names.append(name if data else None)
                    found = blob_table.select().where(blob_table.c.digest == name)
                    if data and conn.execute(found).first() is None:
                        stored = compress(data)
                        conn.execute(
                            blob_table.insert().values(
                                digest=name, size=len(data), stored_size=len(stored), data=stored
                            )
                        )
                row = exchange_row(exchange, 1, names[0], names[1])
                head = v1_link(head, row, exchange.canonical)
                v3_row = {name: value for name, value in row.items() if name in V1_COLUMNS}
                conn.execute(
                    exchange_table.insert().values(
                        v3_row | {"canonical": b"", "canonical_digest": names[2], "chain": head}
                    )
                )
            conn.execute(sqlalchemy.text("UPDATE cassettes SET head = :head"), {"head": head})
    finally:
        engine.dispose()


def test_a_version_3_store_is_migrated_and_its_chain_still_holds(store_url: str) -> None:
    old = [download(Slot(0, 0), "k0", body=b"answer 0", request_body=b'{"q": 0}')]
    new = [
        dataclasses.replace(
            download(Slot(1, 0), "k1", body=b"answer 1"), context={"run-id": "r\udc80 1"}
        ),
        download(Slot(2, 1), "k0", body=b"answer 0 again", request_body=b'{"q": 0}'),
    ]
    v3_store(store_url, old, new)
    chains = run_sql(store_url, "SELECT seq, chain FROM exchanges ORDER BY seq")

    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        report = store.verify("c")
        assert (report.ok, report.checked) == (True, 3)
        for sent in old + new:
            found = store.exchange("c", sent.slot.seq)
            assert (
                found.recorded.response is not None
                and found.recorded.response.body == sent.response.body
            )  # type: ignore[union-attr]
            assert found.recorded.canonical == sent.canonical
            assert (
                found.recorded.stripped,
                found.recorded.facts,
                found.recorded.messages,
                found.drift,
            ) == (
                None,
                {},
                None,
                (),
            )
        assert [(s.facts, s.drifted, s.websocket_messages) for s in store.exchanges("c")] == [
            ({}, 0, None)
        ] * 3
        # The run id is taken from the context of what was recorded before.
        by_run = store.exchanges("c", ExchangeFilter(run_id="r\udc80 1"))
        assert [s.seq for s in by_run] == [1]

        later = dataclasses.replace(
            download(store.reserve("c", "k2"), "k2", body=b"answer 2"),
            stripped={"body:$.user": "0123456789abcdef"},
            facts={"model": "gpt-x", "usage": {"total_tokens": 3}},
            messages=(Message(True, True, 0.5, b"hi"),),
        )
        store.submit(later)
        store.note_drift("c", 0, ["body:$.user"], {"run-id": "r-2"})
        store.flush(WAIT)
        report = store.verify("c")
        assert (report.ok, report.checked) == (True, 4)
        found = store.exchange("c", 3)
        assert (found.recorded.stripped, found.recorded.facts, found.recorded.messages) == (
            later.stripped,
            later.facts,
            later.messages,
        )
        assert [d.paths for d in store.exchange("c", 0).drift] == [("body:$.user",)]

        # Rekeying with the same keys gives the old rows their stripped digests, and
        # leaves their chain values as they were.
        changes = store.rekey(
            "c",
            lambda e: Rekeyed(
                e.recorded.key, e.recorded.key_scheme, e.recorded.canonical, {"query:ts": "f" * 16}
            ),
        )
        assert all(c.new_key == c.old_key for c in changes)
        assert store.exchange("c", 0).recorded.stripped == {"query:ts": "f" * 16}
        assert store.verify("c").ok
    assert run_sql(store_url, "SELECT seq, chain FROM exchanges ORDER BY seq")[:3] == chains

    with open_store(store_url) as reopened:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        assert reopened.verify("c").ok


def test_a_migration_to_version_4_cut_short_runs_again(store_url: str) -> None:
    """The columns were added but neither the drifts table nor the version: opening
    finishes the job."""
    with open_store(store_url) as store:
        submit(store, "k0", body=b"answer")
    run_sql(store_url, "DROP TABLE drifts", "UPDATE meta SET value = '3'")
    with open_store(store_url) as store:
        assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        store.note_drift("c", 0, ["body:$.x"], {})
        store.flush(WAIT)
        assert len(store.exchange("c", 0).drift) == 1
        assert store.verify("c").ok


def test_streaming_in_never_waits_for_the_database(store: Store, store_url: str) -> None:
    done = threading.Event()

    def record() -> None:
        ref = stream_in(store, 4 * MiB, seed=14)
        submit(store, "k", body_ref=ref)
        done.set()

    with writes_blocked(store_url):
        threading.Thread(target=record, daemon=True).start()
        assert done.wait(WAIT)  # while the database is still locked
    found = store.lookup("c", "k", 0)
    assert found is not None and found.recorded.response is not None
    assert len(found.recorded.response.body) == 4 * MiB


# -- every past version ---------------------------------------------------------------

STEPS = (
    add_blob_parts,
    add_canonical_digest,
    add_facts_and_drift,
    add_search_and_misses,
    add_blob_bases,
    index_runs_and_compact_search,
    add_signals_and_notes,
)
"""Version N+1's step at STEPS[N - 1], run as that version ran it before freezeframe kept its
migrations as Alembic revisions."""


def store_at(url: str, version: int, sent: list[NewExchange]) -> None:
    """A store of ``version`` from before Alembic: ``sent`` written by version 1, then each
    step up to ``version`` run in turn, and no ``alembic_version`` table."""
    v1_store(url, sent)
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            for step in STEPS[: version - 1]:
                step(conn)
            conn.execute(sqlalchemy.text(f"UPDATE meta SET value = '{version}'"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("version", range(1, len(STEPS) + 2))  # each version before Alembic
def test_a_store_of_every_past_version_is_migrated_to_the_current_schema(
    store_url: str, version: int
) -> None:
    sent = [download(Slot(0, 0), "k0", body=b"answer", request_body=b'{"q": 1}')]
    store_at(store_url, version, sent)

    with open_store(store_url) as store:
        old = store.lookup("c", "k0", 0)
        assert old is not None and old.recorded.response is not None
        assert (old.recorded.request_body, old.recorded.response.body) == (b'{"q": 1}', b"answer")
        submit(store, "k1", body=b"answer 1")
        store.flush(WAIT)
        report = store.verify("c")
        assert (report.ok, report.checked) == (True, 2)
        assert sorted(hit.seq for hit in store.search("answer", "c")) == [0, 1]
    assert schema_of(store_url) == new_store_schema(store_url)
    assert run_sql(store_url, "SELECT value FROM meta WHERE name = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    assert run_sql(store_url, "SELECT version_num FROM alembic_version") == [(HEAD,)]
