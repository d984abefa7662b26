"""The one thread that writes: exchanges queue up and are inserted in batches.

The proxy hands over a finished exchange from its event loop and must not wait
for a disk or a network, so submit() only puts it on a queue that one thread
drains (datasette's ``_send_to_write_thread``). The hash chain links exchanges in
the order they are inserted.

The database is the truth about a cassette, because several processes may write one
(proxy replicas on one PostgreSQL, two proxies on one SQLite file). Each batch runs in a
transaction that holds the cassettes it writes (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL:
the cassette rows ``FOR UPDATE``) and reads their chain heads there, so two writers chain
one after the other, never from the same head. A slot (seq, occurrence) comes from this
process's counters, taken when the request arrived; when another process has taken it
meanwhile, the insert fails on the unique constraints and the batch is written again with
the slots the database still has free (the next seq, the key's next occurrence). So a
cassette recorded by several processes at once has every exchange once, no seq twice, and
a chain that verifies.

A batch is committed when the queue momentarily empties or BATCH_SIZE exchanges
have accumulated. If a batch fails, its exchanges are retried one by one, so one
bad exchange costs only itself; what cannot be written is logged and dropped.

Bodies streamed through a blob writer arrive on the same queue, ahead of the
exchanges that reference them, and are written in a transaction of their own, one
part per statement, so neither side ever holds more than a part. An exchange whose
body could not be written fails on its foreign key rather than dangling.

An exchange the proxy submitted unread (``NewExchange.to_read``) is read here first, by the
function the store was opened with (open_store's ``reader``: facts and triage's signals,
evidence.reading_in), once, before its first attempt: the reading parses its bodies, which
on the proxy's event loop cost every client its time. A reader that fails costs the
exchange its facts and signals, never its recording.

Drift notes (Store.note_drift) and misses (Store.note_miss) come the same way, so that
noting one never waits either; each is written after the exchanges queued before it, in a
transaction of its own, since it is an observation and not part of any chain.

Every other write comes the same way, as a job (storage.jobs) on a ticket
(storage.sql.jobs): a fork, a rekey, a removal, a collection, a note, signals, an import.
It is done after the exchanges queued before it are written and indexed, in a transaction of
its own, and answered on its ticket; a job that deletes blobs or search values makes the
writer forget which it knew stored, there and then, so no caller keeps its caches right. An
import is written in one transaction, batch by batch with the same code as recorded
exchanges, its large bodies streamed in within that transaction too, so that a failure
anywhere leaves nothing of it behind.

Committed exchanges are indexed for search later, several batches at once, in a transaction
of their own (storage.sql.search): when INDEX_BATCH of them are waiting, when the oldest has
waited INDEX_WAIT_S, and always before a flush marker is set or the thread ends, so that a
request never waits behind the indexing of the one before. Indexing costs per transaction
as well as per value (the commit writes an FTS5 segment, which later merges cost again): a
proxy answering one connection commits batches of one, and indexing those one per
transaction took about 40% more CPU than 32 in one. The values are worked out before the
transaction starts, so the database is held only for the inserts.

A batch costs little beyond the database's own work, since the proxy's event loop
waits for the GIL while this thread runs: the thread keeps one connection, runs
statements compiled once (storage.sql.prepared) with executemany, and stores a body
or canonical form with an insert-if-absent, compressing it only when it is not
among the digests it already knows to be stored (KnownDigests).
"""

import dataclasses
import importlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Dialect, Engine, bindparam, func, insert, select, update
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.pool import PoolProxiedConnection

from freezeframe.storage import blobs, transcript
from freezeframe.storage.chain import GENESIS, Scalar, exchange_digest, link
from freezeframe.storage.deltas import Base, Lines
from freezeframe.storage.errors import StoreClosed, StoreError
from freezeframe.storage.jobs import Import
from freezeframe.storage.objects import Outbox
from freezeframe.storage.records import (
    BlobRef,
    Imported,
    ImportedCassette,
    Miss,
    NewExchange,
    Note,
    Slot,
    check_facts,
)
from freezeframe.storage.search import Searchable
from freezeframe.storage.spool import SpooledBlob, SpoolWriter
from freezeframe.storage.sql import jobs
from freezeframe.storage.sql import search as search_index
from freezeframe.storage.sql.engine import insert_ignore, reason
from freezeframe.storage.sql.fork import origin_text, start_of
from freezeframe.storage.sql.gc import GC_GENERATION
from freezeframe.storage.sql.jobs import Ticket
from freezeframe.storage.sql.misses import MISS_COLUMNS, miss_row
from freezeframe.storage.sql.prepared import Prepared
from freezeframe.storage.sql.rows import (
    blob_row,
    chain_fields,
    exchange_row,
    external_row,
    json_text,
)
from freezeframe.storage.sql.schema import blob_parts, cassettes, drifts, exchanges, meta, misses
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.sql.schema import notes as notes_table
from freezeframe.storage.sql.search import SearchIndex
from freezeframe.storage.stats import StatsCounter, WriterStats

log = logging.getLogger("freezeframe.storage")

BATCH_SIZE = 64

INDEX_BATCH = 32
"""Committed exchanges that are indexed together once that many wait. Indexing costs per
transaction (a commit, the FTS5 segment it writes) and per statement more than per value,
and a proxy answering requests one at a time commits batches of one: 32 of them share one
index transaction. Much larger only delays the index without saving more: at 32 the
commit is already a small part of the cost."""
INDEX_WAIT_S = 0.5
"""The longest a committed exchange waits for its index when fewer than INDEX_BATCH do. A
search in this process indexes what waits first (Store.search), and a process that opens the
store (``freezeframe search`` in a second shell) indexes it itself (search.catch_up); only a
process that has the store open already (a proxy replica) finds it this much later than its
listing: less than the time it takes a person to look."""

_UNREAD = object()
"""What a writer knows of GC_GENERATION before its first transaction: nothing."""

KNOWN_DIGESTS = 16_384
"""How many digests of stored blobs the writer remembers (about 4 MB of them)."""

_BLOB_COLUMNS = ("digest", "size", "stored_size", "data", "parts", "stored_at", "base", "depth")

_BlobRow = dict[str, Scalar]
_EXCHANGE_COLUMNS = tuple(column.name for column in exchanges.c if column.name != "id")


class _Statements:
    """The writer's statements, compiled for one database."""

    def __init__(self, engine: Engine) -> None:
        dialect: Dialect = engine.dialect
        self.add_blobs = Prepared(insert_ignore(engine, blobs_table), dialect, _BLOB_COLUMNS)
        self.add_blob = Prepared(
            insert_ignore(engine, blobs_table).returning(blobs_table.c.digest),
            dialect,
            _BLOB_COLUMNS,
        )
        self.add_part = Prepared(insert(blob_parts), dialect, ("digest", "idx", "data"))
        self.add_exchanges = Prepared(insert(exchanges), dialect, _EXCHANGE_COLUMNS)
        self.set_head = Prepared(
            update(cassettes)
            .where(cassettes.c.id == bindparam("cassette_id"))
            .values(head=bindparam("head")),
            dialect,
        )
        self.set_origin = Prepared(
            update(cassettes)
            .where(cassettes.c.id == bindparam("cassette_id"))
            .values(origin=bindparam("origin")),
            dialect,
        )
        self.add_cassette = Prepared(
            insert_ignore(engine, cassettes), dialect, ("name", "created_at", "head")
        )
        tip = select(cassettes.c.id, cassettes.c.head).where(cassettes.c.name == bindparam("name"))
        # SQLite has no row locks: its writer's transaction is exclusive instead.
        self.tip = Prepared(tip if dialect.name == "sqlite" else tip.with_for_update(), dialect)
        in_cassette = exchanges.c.cassette_id == bindparam("cassette_id")
        self.seq_taken = Prepared(
            select(exchanges.c.id).where(in_cassette, exchanges.c.seq == bindparam("seq")),
            dialect,
        )
        self.occurrence_taken = Prepared(
            select(exchanges.c.id).where(
                in_cassette,
                exchanges.c.key == bindparam("key"),
                exchanges.c.occurrence == bindparam("occurrence"),
            ),
            dialect,
        )
        self.depth_of = Prepared(
            select(blobs_table.c.depth).where(blobs_table.c.digest == bindparam("digest")),
            dialect,
        )
        self.last_seq = Prepared(select(func.max(exchanges.c.seq)).where(in_cassette), dialect)
        generation = select(meta.c.value).where(meta.c.name == GC_GENERATION)
        # Shared: a collection that holds the row (storage.sql.gc) is waited for.
        self.generation = Prepared(
            generation if dialect.name == "sqlite" else generation.with_for_update(read=True),
            dialect,
        )
        # The key and the start time to the microsecond name one exchange: served by the
        # (cassette_id, key, occurrence) index, and asked only when a batch is retried.
        self.stored_as = Prepared(
            select(exchanges.c.seq, exchanges.c.occurrence).where(
                in_cassette,
                exchanges.c.key == bindparam("key"),
                exchanges.c.started_at == bindparam("started_at"),
            ),
            dialect,
        )
        self.last_occurrence = Prepared(
            select(func.max(exchanges.c.occurrence)).where(
                in_cassette, exchanges.c.key == bindparam("key")
            ),
            dialect,
        )
        self.noted = Prepared(
            select(exchanges.c.cassette_id)
            .join_from(exchanges, cassettes)
            .where(cassettes.c.name == bindparam("cassette"), exchanges.c.seq == bindparam("seq")),
            dialect,
        )
        self.add_drift = Prepared(
            insert(drifts), dialect, ("cassette_id", "seq", "at", "paths", "context")
        )
        self.add_miss = Prepared(insert(misses), dialect, MISS_COLUMNS)
        self.add_note = Prepared(insert(notes_table), dialect, ("cassette", "seq", "at", "text"))
        self.exchange_id = Prepared(
            select(exchanges.c.id).where(
                exchanges.c.cassette_id == bindparam("cassette_id"),
                exchanges.c.seq == bindparam("seq"),
            ),
            dialect,
        )


class KnownDigests:
    """Digests of blobs this writer has seen committed, the most recent KNOWN_DIGESTS.

    A body sent again (a tool schema, a system prompt, the same request's canonical
    form) is then neither compressed nor sent to the database. A digest is added only
    after the transaction that stored or found it committed; one forgotten or never
    known is stored with an insert-if-absent, which is right whatever another process
    wrote meanwhile. Used by the writer thread only.
    """

    def __init__(self, limit: int = KNOWN_DIGESTS) -> None:
        self._limit = limit
        self._digests: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, digest: str) -> bool:
        if digest in self._digests:
            self._digests.move_to_end(digest)
            return True
        return False

    def add(self, digests: Iterable[str]) -> None:
        for digest in digests:
            self._digests[digest] = None
            self._digests.move_to_end(digest)
        while len(self._digests) > self._limit:
            self._digests.popitem(last=False)

    def clear(self) -> None:
        self._digests.clear()


@dataclass(frozen=True)
class DriftNote:
    """A drift to note on exchange ``seq`` of ``cassette`` (see Store.note_drift)."""

    cassette: str
    seq: int
    at: float
    paths: tuple[str, ...]
    context: dict[str, str]


class Marker(Protocol):
    """A flush marker: set once everything queued before it is written (a threading.Event,
    or the writer process's answer to the proxy's flush, storage.sql.writerchild)."""

    def set(self) -> None: ...


_Taken = NewExchange | SpooledBlob | DriftNote | Miss | Ticket | Marker
"""An exchange, a streamed body, a drift note, a miss or a job to write, or a flush marker
to set once everything before it is written."""
_Item = _Taken | None
"""What is queued: something taken, or None: stop after writing everything before it."""


@dataclass(frozen=True)
class _Tip:
    """Where a cassette's chain ends: its row id and the chain value of its last exchange."""

    cassette_id: int
    head: str


Moved = Callable[[NewExchange, Slot], None]
"""Told when an exchange was stored at another slot than the one it was given."""


class Writer:
    """Owns the writer thread. ``done(exchange, ok)`` is called from that thread
    once an exchange is committed (ok) or given up on (not ok), after ``moved`` if it was
    stored at another slot; ``served()``, if given, after each round of work (the writer
    process reports its state to the proxy then)."""

    def __init__(
        self,
        engine: Engine,
        done: Callable[[NewExchange, bool], None],
        where: str,
        moved: Moved,
        served: Callable[[], None] | None = None,
        objects: "Outbox | None" = None,
        reader: str | None = None,
    ) -> None:
        self._engine = engine
        self._reader = reader
        """The dotted path of the reader's factory (open_store's ``reader``)."""
        self._read: Callable[[NewExchange], NewExchange] | None = None
        """The reader, once the first exchange to read has imported it."""
        self._objects = objects
        """Where bodies go when the store keeps them in object storage (--blobs)."""
        self._generation: object = _UNREAD
        """GC_GENERATION as the last transaction read it (storage.sql.gc; None: no collection
        has run)."""
        self._done = done
        self._moved = moved
        self._served = served
        self._where = where
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._ids: dict[str, int] = {}
        """Cassette row ids by name, for indexing what was just written."""
        self._statements = _Statements(engine)
        self._known = KnownDigests()
        self._lines = Lines()
        self._search = SearchIndex(engine)
        self._unindexed: list[NewExchange] = []
        """Committed exchanges not yet indexed for search, in commit order."""
        self._unindexed_since = 0.0
        """When the oldest of them was committed (time.monotonic())."""
        self._stats = StatsCounter()
        self._sqlite = engine.dialect.name == "sqlite"
        self._connection: PoolProxiedConnection | None = None
        """The writer thread's own connection, kept between batches."""
        self._lost = False
        """Whether the last failed transaction lost its connection."""
        self.failing: str | None = None
        """Why the last exchange the writer gave up on could not be stored; None once one
        is stored again. Read by Store.health() from other threads."""
        self._stopping = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name="freezeframe-store-writer", daemon=True
        )
        self._thread.start()

    def put(self, item: NewExchange | SpooledBlob | DriftNote | Miss | Ticket | Marker) -> None:
        """Queue an exchange, a drift note, a miss, a job, a streamed body (which the
        writer then discards), or a flush marker of the caller's."""
        with self._lock:
            if self._stopping:
                raise StoreClosed(self._where)
            self._queue.put(item)

    def flush(self, timeout: float | None) -> None:
        """Wait until everything put so far is written (or, once stopping, until all is)."""
        with self._lock:
            if self._stopping:
                marker = None
            else:
                marker = threading.Event()
                self._queue.put(marker)
        finished = self._join(timeout) if marker is None else marker.wait(timeout)
        if not finished:
            raise StoreError(f"store {self._where} did not finish writing within {timeout}s")

    def stats(self) -> WriterStats:
        """What the writer has done so far, and how much is queued for it now."""
        return self._stats.snapshot(self._queue.qsize())

    def stop(self) -> None:
        """Write everything put so far, then end the thread. Safe to call twice."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._queue.put(None)
        self._thread.join()

    def _join(self, timeout: float | None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._catch_up()
            self._serve()
        finally:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _serve(self) -> None:
        while True:
            items, stop = self._take()
            batch: list[NewExchange] = []
            notes: list[DriftNote | Miss] = []
            markers: list[Marker] = []
            for item in items:
                if isinstance(item, NewExchange):
                    batch.append(item)
                elif isinstance(item, SpooledBlob):
                    # Exchanges queued before the body go first; those after may need it.
                    if batch:
                        self._write(batch)
                        batch = []
                    self._store_blob(item)
                elif isinstance(item, DriftNote | Miss):
                    notes.append(item)
                elif isinstance(item, Ticket):
                    # A job sees everything queued before it written.
                    if batch:
                        self._write(batch)
                        batch = []
                    if notes:
                        self._note(notes)
                        notes = []
                    self._do(item)
                else:
                    markers.append(item)
            if batch:
                self._write(batch)
            if notes:
                self._note(notes)
            if markers or stop or self._index_due() == 0.0:
                self._index_waiting()
            for marker in markers:
                marker.set()
            if self._served is not None:
                self._served()
            if stop:
                return

    def _catch_up(self) -> None:
        """Index what a process killed before indexing left behind (storage.sql.search)."""
        try:
            search_index.catch_up(self._engine)
        except Exception as exc:
            log.error(
                "could not index the unindexed exchanges of %s for search: %s",
                self._where,
                reason(exc, self._engine.url),
            )

    def _index_due(self) -> float | None:
        """Seconds until the waiting exchanges are due to be indexed (0.0: now; None: none
        wait)."""
        if not self._unindexed:
            return None
        if len(self._unindexed) >= INDEX_BATCH:
            return 0.0
        return max(0.0, self._unindexed_since + INDEX_WAIT_S - time.monotonic())

    def _index_waiting(self) -> None:
        if self._unindexed:
            waiting, self._unindexed = self._unindexed, []
            self._index(waiting)

    def _take(
        self,
    ) -> tuple[list[_Taken], bool]:
        """Block for one item (no longer than until the waiting exchanges are due to be
        indexed: then nothing), then take what else is already queued, up to a batch of
        exchanges; True if a stop was taken."""
        items: list[_Taken] = []
        exchanges = 0
        try:
            item = self._queue.get(timeout=self._index_due())
        except queue.Empty:
            return items, False
        while True:
            if item is None:
                return items, True
            items.append(item)
            exchanges += isinstance(item, NewExchange)
            if exchanges >= BATCH_SIZE:
                return items, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return items, False

    def _store_blob(self, blob: SpooledBlob) -> None:
        """Copy a streamed body into the database unless it is there already, then
        delete its spool. A body of one part is stored like any small body."""
        ref = blob.ref
        try:
            # Not skipped when the digest is known: the spool is the only copy left.
            with self._transaction() as cursor:
                self._insert_blob(cursor, blob)
            self._known.add([ref.digest])
        except Exception as exc:
            log.error(
                "could not store body %s (%d bytes) in %s, dropping it: %s",
                ref.digest[:16],
                ref.size,
                self._where,
                reason(exc, self._engine.url),
            )
        finally:
            blob.discard()

    def _insert_blob(self, cursor: DBAPICursor, blob: SpooledBlob) -> None:
        """Insert a spooled body unless the database has it, one part per statement; with
        object storage, upload it part by part (a multipart upload) and insert its name."""
        ref = blob.ref
        if self._objects is not None:
            self._collected(cursor)
            self._objects.put_parts(ref.digest, map(blobs.decompress_part, blob.parts()))
            self._statements.add_blob.execute(cursor, external_row(ref.digest, ref.size))
            cursor.fetchone()
            return
        parts = blob.parts()
        row = {
            "digest": ref.digest,
            "size": ref.size,
            "stored_size": blob.stored_size,
            "stored_at": time.time(),
            "base": None,
            "depth": 0,
        }
        if blob.count == 1:
            row |= {"data": next(parts), "parts": 0}
        else:
            row |= {"data": b"", "parts": blob.count}
        # RETURNING, not rowcount: drivers need not count rows an INSERT skipped.
        self._statements.add_blob.execute(cursor, row)
        added = cursor.fetchone() is not None
        if blob.count > 1 and added:
            for index, data in enumerate(parts):
                self._statements.add_part.execute(
                    cursor, {"digest": ref.digest, "idx": index, "data": data}
                )

    @contextmanager
    def _transaction(self, *, exclusive: bool = False) -> Iterator[DBAPICursor]:
        """A cursor in a transaction on the writer's connection, committed at the end
        of the block or rolled back; a connection that cannot even roll back is
        dropped, and the next transaction checks out another. ``exclusive``: on SQLite,
        the database's write lock is taken at the start, so what the transaction reads
        (a chain head) is still true when it writes."""
        if self._connection is None:
            self._connection = self._engine.raw_connection()
        connection = self._connection
        cursor = connection.cursor()
        try:
            if exclusive and self._sqlite:
                cursor.execute("BEGIN IMMEDIATE")
            yield cursor
            cursor.close()
            connection.commit()
        except BaseException:
            try:
                cursor.close()
                connection.rollback()
            except Exception:
                self._connection = None
                self._lost = True
                connection.invalidate()
            raise

    def _write(
        self,
        batch: list[NewExchange],
        again: bool = False,
        ready: list[NewExchange] | None = None,
    ) -> None:
        """Store ``batch`` as submitted (``ready``: each read already, see _read_in); the
        callbacks get the exchanges as submitted, which is how their owners know them."""
        if ready is None:
            ready = [self._read_in(exchange) for exchange in batch]
        # Any exception, not only database errors: a malformed exchange must not
        # kill the thread every later exchange depends on.
        try:
            written = self._commit(ready, resolve=again)
        except Exception as exc:
            lost, self._lost = self._lost, False
            if not again:
                # Another process may have taken a slot (the unique constraints said so),
                # the kept connection may have died with the server, or a blob taken for
                # stored been deleted behind the store's back: try once more, on a fresh
                # connection if need be, storing every blob the batch uses, in the slots
                # the database still has free.
                if lost or self._known:
                    self._known.clear()
                self._write(batch, again=True, ready=ready)
                return
            if len(batch) == 1:
                self._give_up(batch[0], exc)
                return
            log.error(
                "writing %d exchanges to %s failed, retrying them one by one: %s",
                len(batch),
                self._where,
                reason(exc, self._engine.url),
            )
            for exchange, read in zip(batch, ready, strict=True):
                self._write([exchange], again=True, ready=[read])
        else:
            self.failing = None
            for given, stored in zip(batch, written, strict=True):
                if stored.slot != given.slot:
                    self._moved(given, stored.slot)
                self._done(given, True)
            if not self._unindexed:
                self._unindexed_since = time.monotonic()
            self._unindexed.extend(written)

    def _read_in(self, exchange: NewExchange) -> NewExchange:
        """``exchange`` with what its reader reads into it (facts, signals), if it came
        unread; without them, and said, if the reader fails or the store has none."""
        if exchange.to_read is None:
            return exchange
        try:
            if self._read is None:
                if self._reader is None:
                    raise LookupError("the store was opened without a reader")
                module, _, name = self._reader.partition(":")
                self._read = getattr(importlib.import_module(module), name)()
            read = self._read(exchange)
            check_facts(read.facts)
            return dataclasses.replace(read, to_read=None)
        except Exception as exc:
            log.error(
                "could not read the facts and signals of exchange %d of cassette %r; "
                "storing it without them: %s: %s",
                exchange.slot.seq,
                exchange.cassette,
                type(exc).__name__,
                exc,
            )
            return dataclasses.replace(exchange, to_read=None)

    def _give_up(self, exchange: NewExchange, exc: Exception) -> None:
        self.failing = reason(exc, self._engine.url)
        log.error(
            "could not store exchange %d of cassette %r in %s, dropping it: %s",
            exchange.slot.seq,
            exchange.cassette,
            self._where,
            reason(exc, self._engine.url),
        )
        self._done(exchange, False)

    def _commit(self, batch: list[NewExchange], *, resolve: bool) -> list[NewExchange]:
        """Insert a batch in one transaction that holds its cassettes, chaining each exchange
        to the one before from the head the database has now. With ``resolve``, a slot that
        is taken is replaced by the next free one first. Returns the exchanges as stored.

        The known digests change only once the transaction has committed, so a rolled-back
        batch leaves no trace.
        """
        named = [_Named.of(exchange) for exchange in batch]
        bodies = {name: data for each in named for name, data in each.bodies()}
        stored = self._compress(batch, named)
        began = time.perf_counter()
        tips: dict[str, _Tip] = {}
        rows = []
        written: list[NewExchange] = []
        statements = self._statements
        with self._transaction(exclusive=True) as cursor:
            if self._collected(cursor):
                for name, data in bodies.items():
                    self._put(name, data)
            for exchange, names in zip(batch, named, strict=True):
                name = exchange.cassette
                tip = tips.get(name) or self._tip(cursor, name)
                if resolve:
                    stored_as = self._stored_as(cursor, tip.cassette_id, exchange)
                    if stored_as is not None:
                        # Committed by the attempt whose answer was lost: written, once.
                        written.append(stored_as)
                        continue
                    exchange = self._free_slot(cursor, tip.cassette_id, exchange, written)
                row = exchange_row(
                    exchange, tip.cassette_id, names.request, names.response, names.messages
                )
                # The chain covers the form itself; the row names its blob instead.
                head = link(tip.head, exchange_digest(chain_fields(row, name)))
                row["chain"] = head
                row["canonical_digest"] = names.form
                row["canonical"] = b""
                rows.append(row)
                written.append(exchange)
                tips[name] = _Tip(tip.cassette_id, head)
            missing = [stored[name] for name in bodies if name in stored]
            if missing:
                missing = self._settle(cursor, missing, bodies)
                statements.add_blobs.executemany(cursor, missing)
            statements.add_exchanges.executemany(cursor, rows)
            for tip in tips.values():
                statements.set_head.execute(
                    cursor, {"cassette_id": tip.cassette_id, "head": tip.head}
                )
        self._ids.update({name: tip.cassette_id for name, tip in tips.items()})
        self._known.add(bodies)
        self._stats.committed(
            time.perf_counter() - began,
            len(written),
            [(int(row["size"] or 0), int(row["stored_size"] or 0)) for row in missing],
            [len(data) for name, data in bodies.items() if name not in stored],
        )
        return written

    def _collected(self, cursor: DBAPICursor) -> bool:
        """Whether a collection may have deleted objects since the last transaction read
        GC_GENERATION: then the bodies this one names are uploaded again, in it, before it
        commits. Waits for a collection that is running. False without object storage."""
        if self._objects is None:
            return False
        found = self._statements.generation.first(cursor, {})
        generation = None if found is None else found[0]
        moved = generation != self._generation
        self._generation = generation
        return moved

    def _put(self, name: str, data: bytes) -> None:
        assert self._objects is not None
        self._objects.put(name, data)

    def _compress(self, batch: list[NewExchange], named: list["_Named"]) -> dict[str, _BlobRow]:
        """The blob rows of the bodies not known to be stored, compressed before the
        transaction so that the database is not held meanwhile. A request body is stored
        against an earlier request of its conversation (storage.deltas), and a canonical
        form against an earlier form of it: forms grow turn by turn as their bodies do, and
        sorting keys makes a form a poor delta of its own body."""
        stored: dict[str, _BlobRow] = {}
        for exchange, names in zip(batch, named, strict=True):
            request = names.request_body
            for body in names.brought:
                if body.name in stored or body.name in self._known:
                    continue
                if self._objects is not None:
                    # Written before the row that names it commits: never a dangling name.
                    self._objects.put(body.name, body.data)
                    stored[body.name] = external_row(body.name, len(body.data))
                    continue
                base = None
                path = exchange.path.split("?")[0]
                line = (exchange.cassette, exchange.host, exchange.port, path)
                if body.name == names.request and request is not None:
                    base = self._lines.base_for(line, body.name, body.data)
                elif body.name == names.form:
                    base = self._lines.base_for((*line, "form"), body.name, body.data)
                stored[body.name] = blob_row(body.name, body.data, base)
        return stored

    def _settle(
        self, cursor: DBAPICursor, rows: list[_BlobRow], bodies: dict[str, bytes]
    ) -> list[_BlobRow]:
        """The rows to insert, each stored against a base only if that base is in the
        database (or inserted before it here) and the chain stays within MAX_DEPTH; a row
        whose base is not is compressed again, on its own. The database's word on a base
        counts over this batch's: an insert-if-absent keeps what is there."""
        if self._objects is not None:
            return rows
        depths: dict[str, int] = {}
        settled = []
        for row in rows:
            name, base = str(row["digest"]), row["base"]
            if isinstance(base, str):
                found = self._statements.depth_of.first(cursor, {"digest": base})
                depth = depths.get(base) if found is None else found[0] or 0
                if depth is None or depth >= blobs.MAX_DEPTH:
                    row = blob_row(name, bodies[name])
                else:
                    row = row | {"depth": depth + 1}
            depths[name] = int(row["depth"] or 0)
            settled.append(row)
        return settled

    def _stored_as(
        self, cursor: DBAPICursor, cassette_id: int, exchange: NewExchange
    ) -> NewExchange | None:
        """``exchange`` as the database already has it, or None. A commit can succeed while
        its answer is lost (the server or the connection goes away in between); the retry
        then finds the exchange's own row, which must count as written rather than be
        stored a second time in the next free slot."""
        found = self._statements.stored_as.first(
            cursor,
            {"cassette_id": cassette_id, "key": exchange.key, "started_at": exchange.started_at},
        )
        if found is None:
            return None
        seq, occurrence = found
        log.info(
            "exchange %d of cassette %r was already stored as %d: the commit that wrote it "
            "succeeded but its answer was lost",
            exchange.slot.seq,
            exchange.cassette,
            seq,
        )
        return dataclasses.replace(exchange, slot=Slot(seq, occurrence))

    def _free_slot(
        self,
        cursor: DBAPICursor,
        cassette_id: int,
        exchange: NewExchange,
        earlier: list[NewExchange],
    ) -> NewExchange:
        """``exchange`` in its slot if the database (and this batch) has it free, else in
        the cassette's next seq and its key's next occurrence."""
        slot = exchange.slot
        ours = {e.slot.seq for e in earlier if e.cassette == exchange.cassette}
        key = exchange.key
        occurrences = {
            e.slot.occurrence for e in earlier if e.cassette == exchange.cassette and e.key == key
        }
        ids = {
            "cassette_id": cassette_id,
            "seq": slot.seq,
            "key": key,
            "occurrence": slot.occurrence,
        }
        seq_taken = slot.seq in ours or self._statements.seq_taken.first(cursor, ids) is not None
        occurrence_taken = (
            slot.occurrence in occurrences
            or self._statements.occurrence_taken.first(cursor, ids) is not None
        )
        if not seq_taken and not occurrence_taken:
            return exchange
        seq, occurrence = slot.seq, slot.occurrence
        if seq_taken:
            found = self._statements.last_seq.first(cursor, ids)
            seq = max([-1 if found is None or found[0] is None else found[0], *ours]) + 1
        if occurrence_taken:
            found = self._statements.last_occurrence.first(cursor, ids)
            last = -1 if found is None or found[0] is None else found[0]
            occurrence = max([last, *occurrences]) + 1
        log.info(
            "exchange %d of cassette %r is stored as %d (occurrence %d): another process "
            "recording into it had taken its place",
            slot.seq,
            exchange.cassette,
            seq,
            occurrence,
        )
        return dataclasses.replace(exchange, slot=Slot(seq, occurrence))

    def _do(self, ticket: Ticket) -> None:
        """Do a job, after indexing what waits (a removal then drops it with its exchanges),
        and answer its ticket with what it returned or raised."""
        self._index_waiting()
        job = ticket.job
        try:
            if isinstance(job, Import):
                result: object = self._import(job, ticket)
            else:
                result = jobs.perform(job, self._engine, self._where, self._objects)
        except BaseException as exc:  # the caller's to raise, never the thread's end
            ticket.answer(None, exc)
            return
        finally:
            if jobs.forgets_stored(job):
                self._known.clear()
                self._search.forget()
        ticket.answer(result, None)

    def _import(self, job: Import, ticket: Ticket) -> ImportedCassette:
        """Run an import; a database error is said in one line."""
        try:
            return self._load(job, ticket)
        except self._engine.dialect.loaded_dbapi.Error as exc:
            what = reason(exc, self._engine.url)
            raise StoreError(
                f"cannot import cassette {job.cassette!r} into store {self._where}: {what}"
            ) from None
        finally:
            close = getattr(job.exchanges, "close", None)
            if close is not None:
                close()

    def _load(self, job: Import, ticket: Ticket) -> ImportedCassette:
        """Write an import as a new cassette in one transaction: its bodies, its exchanges
        in batches chained from GENESIS, their drift notes and search values."""
        cassette = job.cassette
        written: list[str] = []
        try:
            with self._transaction(exclusive=True) as cursor:
                if self._statements.tip.first(cursor, {"name": cassette}) is not None:
                    raise StoreError(
                        f"cassette {cassette!r} already exists in store {self._where}; "
                        "import it under another name (--as NAME)"
                    )
                tip = self._tip(cursor, cassette)
                if job.origin is not None:
                    origin = origin_text(job.origin)
                    self._statements.set_origin.execute(
                        cursor, {"cassette_id": tip.cassette_id, "origin": origin}
                    )
                    tip = _Tip(tip.cassette_id, start_of(origin))
                batch: list[Imported] = []
                count = 0
                for item in job.exchanges:
                    if ticket.cancelled():
                        raise StoreError(f"the import into {cassette!r} was cancelled")
                    check_facts(item.exchange.facts)
                    for ref, read in item.streams:
                        self._stream_in(cursor, ref, read)
                        written.append(ref.digest)
                    batch.append(item)
                    if len(batch) == BATCH_SIZE:
                        tip = self._insert_imported(cursor, tip, batch, written)
                        count, batch = count + len(batch), []
                if batch:
                    tip = self._insert_imported(cursor, tip, batch, written)
                    count += len(batch)
                self._insert_notes(cursor, tip.cassette_id, cassette, job.notes)
                self._statements.set_head.execute(
                    cursor, {"cassette_id": tip.cassette_id, "head": tip.head}
                )
        except Exception:
            self._search.forget()
            raise
        self._ids[cassette] = tip.cassette_id
        self._known.add(written)
        return ImportedCassette(cassette, count, tip.head)

    def _insert_notes(
        self, cursor: DBAPICursor, cassette_id: int, cassette: str, notes: Sequence[Note]
    ) -> None:
        """Keep an import's case notes on the cassette it is imported as; a note on an
        exchange the import does not hold refuses the import (StoreError)."""
        for note in notes:
            if note.seq is not None:
                found = self._statements.exchange_id.first(
                    cursor, {"cassette_id": cassette_id, "seq": note.seq}
                )
                if found is None:
                    raise StoreError(
                        f"a case note is on exchange {note.seq} of {cassette!r}, "
                        "which the import does not hold"
                    )
            row = {"cassette": cassette, "seq": note.seq, "at": note.at, "text": note.text}
            self._statements.add_note.execute(cursor, row)

    def _stream_in(
        self, cursor: DBAPICursor, ref: BlobRef, read: Callable[[], Iterable[bytes]]
    ) -> None:
        """Spool a body from its source and insert it in the open transaction, if it is
        the body ``ref`` names."""
        spooled: list[SpooledBlob] = []
        writer = SpoolWriter(spooled.append, self._where)
        try:
            for piece in read():
                writer.write(piece)
            got = writer.finish()
        finally:
            writer.abort()
        try:
            if got != ref:
                raise StoreError(
                    f"body {ref.digest[:16]} ({ref.size} bytes) does not match what was read "
                    f"for it ({got.digest[:16]}, {got.size} bytes)"
                )
            for blob in spooled:
                self._insert_blob(cursor, blob)
        finally:
            for blob in spooled:
                blob.discard()

    def _insert_imported(
        self, cursor: DBAPICursor, tip: _Tip, batch: list[Imported], written: list[str]
    ) -> _Tip:
        """Insert one batch of an import as _commit inserts recorded exchanges, chained on
        from ``tip``; returns where the chain ends after it."""
        exchanges_ = [item.exchange for item in batch]
        named = [_Named.of(exchange) for exchange in exchanges_]
        bodies = {name: data for each in named for name, data in each.bodies()}
        stored = self._compress(exchanges_, named)
        rows = []
        head = tip.head
        for exchange, names in zip(exchanges_, named, strict=True):
            row = exchange_row(
                exchange, tip.cassette_id, names.request, names.response, names.messages
            )
            head = link(head, exchange_digest(chain_fields(row, exchange.cassette)))
            row |= {"chain": head, "canonical_digest": names.form, "canonical": b""}
            rows.append(row)
        missing = [stored[name] for name in bodies if name in stored]
        if missing:
            self._statements.add_blobs.executemany(cursor, self._settle(cursor, missing, bodies))
        self._statements.add_exchanges.executemany(cursor, rows)
        written.extend(bodies)
        indexed = []
        for item in batch:
            seq = item.exchange.slot.seq
            for note in item.drift:
                self._statements.add_drift.execute(
                    cursor,
                    {
                        "cassette_id": tip.cassette_id,
                        "seq": seq,
                        "at": note.at,
                        "paths": json_text(list(note.paths)),
                        "context": json_text(dict(note.context)),
                    },
                )
            found = self._statements.exchange_id.first(
                cursor, {"cassette_id": tip.cassette_id, "seq": seq}
            )
            if found is not None:
                indexed.append(
                    (found[0], tip.cassette_id, self._search.values(item.exchange, tip.cassette_id))
                )
        self._search.add(cursor, indexed)
        return _Tip(tip.cassette_id, head)

    def _index(self, batch: list[NewExchange]) -> None:
        """Make committed exchanges searchable, and mark the highest id indexed; a failure
        costs the index (until a store opened later catches up), never the exchanges."""
        held: list[tuple[NewExchange, list[Searchable]]] = []
        for exchange in batch:
            try:
                cassette_id = self._ids[exchange.cassette]
                held.append((exchange, self._search.values(exchange, cassette_id)))
            except Exception:
                log.exception(
                    "cannot index exchange %d of cassette %r for search",
                    exchange.slot.seq,
                    exchange.cassette,
                )
        try:
            with self._transaction(exclusive=True) as cursor:
                rows = []
                for exchange, values in held:
                    cassette_id = self._ids[exchange.cassette]
                    found = self._statements.exchange_id.first(
                        cursor, {"cassette_id": cassette_id, "seq": exchange.slot.seq}
                    )
                    if found is not None:
                        rows.append((found[0], cassette_id, values))
                self._search.add(cursor, rows)
                if rows:
                    self._search.mark(cursor, max(row[0] for row in rows))
        except Exception as exc:
            self._search.forget()
            log.error(
                "could not index %d exchanges for search in %s: %s",
                len(batch),
                self._where,
                reason(exc, self._engine.url),
            )

    def _note(self, notes: list[DriftNote | Miss], again: bool = False) -> None:
        """Write drift notes, each on the exchange it names, and misses; a drift note whose
        exchange is not in the store is logged and dropped, and so are all when the
        database fails (after one more try, on a fresh connection, if the kept one was
        lost)."""
        missing = []
        try:
            with self._transaction() as cursor:
                for note in notes:
                    if isinstance(note, Miss):
                        self._statements.add_miss.execute(cursor, miss_row(note))
                        continue
                    found = self._statements.noted.first(
                        cursor, {"cassette": note.cassette, "seq": note.seq}
                    )
                    if found is None:
                        missing.append(note)
                        continue
                    self._statements.add_drift.execute(
                        cursor,
                        {
                            "cassette_id": found[0],
                            "seq": note.seq,
                            "at": note.at,
                            "paths": json_text(list(note.paths)),
                            "context": json_text(note.context),
                        },
                    )
        except Exception as exc:
            lost, self._lost = self._lost, False
            if lost and not again:
                self._note(notes, again=True)
                return
            log.error(
                "could not write %d drift notes and misses in %s, dropping them: %s",
                len(notes),
                self._where,
                reason(exc, self._engine.url),
            )
            return
        for note in missing:
            log.error(
                "cannot note drift on exchange %d of cassette %r in %s: it is not there",
                note.seq,
                note.cassette,
                self._where,
            )

    def _tip(self, cursor: DBAPICursor, name: str) -> _Tip:
        """Find or create a cassette, and read its chain head in this transaction, holding
        the cassette until it commits (on SQLite the whole transaction is exclusive)."""
        self._statements.add_cassette.execute(
            cursor, {"name": name, "created_at": time.time(), "head": GENESIS}
        )
        row = self._statements.tip.first(cursor, {"name": name})
        assert row is not None
        return _Tip(row[0], row[1])


@dataclass(frozen=True)
class _Named:
    """The digests an exchange's row names (None: no such body), and the bodies among them
    this exchange brings (a body streamed in already is only named)."""

    request: str | None
    response: str | None
    messages: str | None
    form: str | None
    brought: tuple[Base, ...]

    @classmethod
    def of(cls, exchange: NewExchange) -> "_Named":
        brought: list[Base] = []

        def named(body: bytes, ref: BlobRef | None) -> str | None:
            if ref is not None:
                if body:
                    raise ValueError("a body is given both as bytes and as a BlobRef")
                return ref.digest if ref.size else None
            if not body:
                return None
            name = blobs.digest(body)
            brought.append(Base(name, body))
            return name

        response, messages = exchange.response, exchange.messages
        return cls(
            request=named(exchange.request_body, exchange.request_body_ref),
            response=named(response.body, response.body_ref) if response else None,
            messages=None if messages is None else named(transcript.encode(messages), None),
            form=named(exchange.canonical, None),
            brought=tuple(brought),
        )

    @property
    def request_body(self) -> Base | None:
        """The request body when this exchange brings it (not streamed in)."""
        return next((body for body in self.brought if body.name == self.request), None)

    def bodies(self) -> Iterator[tuple[str, bytes]]:
        for body in self.brought:
            yield body.name, body.data
