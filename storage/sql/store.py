"""SqlStore: the Store on SQLite or PostgreSQL, through SQLAlchemy Core.

Writes go to the writer thread (storage.sql.writer), started by the first write, so a
command that only reads starts none: recordings as they are submitted, everything else
as a job (storage.jobs, Store.write); slot and count bookkeeping
lives in memory (storage.counters); reads run on the caller's thread with a
pooled connection of their own. lookup(), the replay hot path, is one indexed
SELECT that brings the exchange's bodies along (storage.sql.reads), on a
connection its thread keeps. Streamed bodies are spooled on the caller's thread
(storage.spool) and written by the writer thread; read_blob() reads them back
with one SELECT per part.

Every read goes to the database, so what other processes write to the same store
is seen as soon as it is committed. The listings are in storage.sql.listings, and
rewriting keys in storage.sql.rekey.
"""

import dataclasses
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Self

import blake3
from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from freezeframe.storage import blobs
from freezeframe.storage.base import Store
from freezeframe.storage.counters import CassetteCounts, Counters
from freezeframe.storage.errors import CassetteNotFound, ExchangeNotFound, StoreClosed, StoreError
from freezeframe.storage.jobs import Import, Job, Planned, Rekey, Remove
from freezeframe.storage.objects import Outbox, outbox_for
from freezeframe.storage.recording import BlobWriter
from freezeframe.storage.records import (
    BlobRef,
    Candidate,
    CassetteSummary,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    ForkOrigin,
    KeyChange,
    Miss,
    NewExchange,
    Note,
    RecheckResult,
    Rekeyed,
    RunOverview,
    SearchHit,
    Slot,
    TapeRecord,
    TriageRow,
    VerifyReport,
    check_facts,
    format_url,
)
from freezeframe.storage.replaytable import ReplayTable
from freezeframe.storage.spool import SpoolWriter
from freezeframe.storage.sql import bodies, listings, positions, rekey, triage
from freezeframe.storage.sql import search as search_index
from freezeframe.storage.sql.engine import connect, mask, unavailable
from freezeframe.storage.sql.fork import fork_origin_of
from freezeframe.storage.sql.jobs import Waiting
from freezeframe.storage.sql.misses import list_misses
from freezeframe.storage.sql.reads import ExchangeReader
from freezeframe.storage.sql.rows import canonical_of
from freezeframe.storage.sql.schema import ExactText, cassettes, exchanges
from freezeframe.storage.sql.verify import verify_cassette
from freezeframe.storage.sql.writer import DriftNote, Writer
from freezeframe.storage.sql.writerprocess import WriterProcess
from freezeframe.storage.stats import WriterStats

PENDING_WAIT_S = 30.0
"""How long lookup() and read_blob() wait for what was submitted to be written."""
HEALTH_WAIT_S = 0.5
"""How long health() waits for what was submitted to be written before it answers."""
SIGNAL_POLL_S = 0.1
"""How often a wait for the writer looks up, so a Ctrl-C is seen while it waits."""

_IN_CASSETTE = cassettes.c.name == bindparam("cassette")

_COUNTS = (
    select(
        exchanges.c.key,
        func.max(exchanges.c.occurrence).label("last_occurrence"),
        func.count().label("recorded"),
        func.max(exchanges.c.seq).label("last_seq"),
    )
    .join_from(exchanges, cassettes)
    .where(_IN_CASSETTE)
    .group_by(exchanges.c.key)
)

_CASSETTE_ID = select(cassettes.c.id).where(_IN_CASSETTE)

_SEQS = select(exchanges.c.seq).join_from(exchanges, cassettes).where(_IN_CASSETTE)

_CANDIDATE_COLUMNS = ("id", "seq", "occurrence", "key", "method", "scheme", "host", "port", "path")
_FORM_COLUMNS = (exchanges.c.id, exchanges.c.canonical, exchanges.c.canonical_digest)


log = logging.getLogger("freezeframe.storage")


class SqlStore(Store):
    """A Store in a SQL database. Build one with storage.open_store(url)."""

    def __init__(
        self,
        engine: Engine,
        where: str,
        *,
        process_url: str | None = None,
        defer_writer: bool = False,
        objects: Outbox | None = None,
        reader: str | None = None,
    ) -> None:
        self._engine = engine
        self._where = where
        self._objects = objects
        self._cache = blobs.BlobCache(objects=objects)
        self._counters = Counters(self._load_counts)
        self._durable: dict[int, tuple[threading.Event, list[bool]]] = {}
        self._reader_path = reader
        """open_store's ``reader``, for a writer started later."""
        self._process_url = process_url
        """Where a writer process writes; None: the writer is a thread of this process."""
        self._writer: Writer | WriterProcess | None = None
        """None until the first write, with a thread writer or a deferred process; a process
        not deferred is started at once, so the proxy that asked for one knows before it
        serves that it cannot start."""
        if process_url is not None and not defer_writer:
            self._writer = WriterProcess(
                process_url, where, self._written, self._counters.moved, objects, reader
            )
        self._reader = ExchangeReader(engine, self._cache, self._connect)
        self._table = ReplayTable()
        self._blob_writers: weakref.WeakSet[SpoolWriter] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(
        cls,
        url: str,
        *,
        create: bool = True,
        writer_process: bool = False,
        defer_writer: bool = False,
        blobs_url: str | None = None,
        outbox: Path | None = None,
        reader: str | None = None,
    ) -> Self:
        """The store at ``url``; with ``writer_process`` (Linux only), written by a process
        of its own (storage.sql.writerprocess), started now or, with ``defer_writer``, by the
        first write; else by a thread of this one; with ``blobs_url``, bodies in that object
        store (storage.objects), waiting in ``outbox`` while it is away."""
        apart = writer_process and sys.platform == "linux"
        objects = None if blobs_url is None else outbox_for(blobs_url, outbox)
        engine = connect(url, create=create)
        try:
            return cls(
                engine,
                mask(url),
                process_url=url if apart else None,
                defer_writer=defer_writer,
                objects=objects,
                reader=reader,
            )
        except BaseException:
            engine.dispose()
            if objects is not None:
                objects.close()
            raise

    def __repr__(self) -> str:
        return f"<SqlStore {self._where}>"

    @property
    def location(self) -> str:
        return self._where

    def health(self) -> str | None:
        # What was recorded before the question counts in the answer, as it did when the
        # writer was a thread of this process and wrote at once; bounded, so that a writer
        # that is busy, or stuck on a store that went away, never holds /health up.
        writer = self._writer
        if writer is not None:
            with suppress(StoreError):
                writer.flush(HEALTH_WAIT_S)
            if writer.failing is not None:
                return f"cannot write to store {self._where}: {writer.failing}"
        if self._objects is not None and (waiting := self._objects.size()):
            return (
                f"object store {self._objects.location} is away: {waiting} bytes of bodies "
                "wait in the outbox"
            )
        try:
            with self._connect() as conn:
                conn.execute(select(1))
        except StoreError as exc:
            return str(exc)
        return None

    def stats(self) -> WriterStats:
        writer = self._writer
        return WriterStats() if writer is None else writer.stats()

    def outbox(self) -> tuple[bool, int] | None:
        if self._objects is None:
            return None
        waiting = self._objects.size()
        return self._objects.problem is None and not waiting, waiting

    def reserve(self, cassette: str, key: str) -> Slot:
        self._check_open()
        return self._counters.reserve(cassette, key)

    def submit(self, exchange: NewExchange) -> None:
        self._check_open()
        check_facts(exchange.facts)
        # Counted before it is queued, so the writer always finds it when done.
        self._counters.submitted(exchange)
        try:
            self._writing().put(exchange)
        except StoreClosed:
            self._counters.written(exchange, ok=False)
            raise

    def submit_durably(self, exchange: NewExchange, timeout: float) -> bool:
        committed = threading.Event()
        outcome: list[bool] = []
        with self._lock:
            self._durable[id(exchange)] = (committed, outcome)
        try:
            self.submit(exchange)
            return committed.wait(timeout) and outcome == [True]
        finally:
            with self._lock:
                self._durable.pop(id(exchange), None)

    def _written(self, exchange: NewExchange, ok: bool) -> None:
        """The writer is done with ``exchange``: count it, and wake who waits for it."""
        self._counters.written(exchange, ok)
        with self._lock:
            waiting = self._durable.get(id(exchange))
        if waiting is not None:
            waiting[1].append(ok)
            waiting[0].set()

    def flush(self, timeout: float | None = None) -> None:
        writer = self._writer
        if writer is not None:  # else nothing was written to wait for
            writer.flush(timeout)

    def write[T](self, job: Job[T]) -> T:
        self._check_open()
        ticket = Waiting(job)
        self._writing().put(ticket)
        try:
            # In steps: a Ctrl-C the kernel hands to the writer thread (any thread may take a
            # process's signal) runs its handler here only once this thread wakes; an
            # unbounded wait slept through it until the whole import had committed.
            while not ticket.wait(SIGNAL_POLL_S):
                pass
        except BaseException:
            # Ctrl-C: an import rolls back at its next exchange; any job is waited for.
            ticket.cancel()
            ticket.wait(None)
            raise
        finally:
            changed = _changed(job)
            if changed is not None:
                # What this process counted or holds of it is no longer so.
                self._counters.forget(changed)
                self._table.drop(changed)
        return ticket.result()

    def note_drift(
        self, cassette: str, seq: int, paths: Sequence[str], context: Mapping[str, str]
    ) -> None:
        self._check_open()
        self._writing().put(DriftNote(cassette, seq, time.time(), tuple(paths), dict(context)))

    def note_miss(self, miss: Miss) -> None:
        self._check_open()
        self._writing().put(miss)

    def misses(self, cassette: str | None = None, limit: int = 200) -> list[Miss]:
        # A miss is written by the writer after its answer has gone: a flush lists what
        # this process has answered, as search() does.
        self.flush(PENDING_WAIT_S)
        with self._connect() as conn:
            return list_misses(conn, cassette, limit)

    def search(self, query: str, cassette: str | None = None, limit: int = 50) -> list[SearchHit]:
        # The writer indexes committed exchanges a while after it lists them: a flush
        # indexes what this process has recorded, so a search never misses it; and a writer
        # started for it first indexes what a killed process left unindexed.
        self._writing().flush(PENDING_WAIT_S)
        with self._connect() as conn:
            return search_index.search(conn, query, cassette, limit)

    def count(self, cassette: str, key: str) -> int:
        self._check_open()
        return self._counters.count(cassette, key)

    def claim(self, session: str, cassette: str, key: str) -> int:
        with unavailable(f"cannot claim a replay position in store {self._where}", self._engine):
            with self._engine.begin() as conn:
                return positions.claim(conn, session, cassette, key)

    def release(self, session: str) -> None:
        with unavailable(f"cannot reset replay session in store {self._where}", self._engine):
            with self._engine.begin() as conn:
                positions.release(conn, session)

    def preload(self, cassette: str) -> int:
        if not self._table.loaded(cassette):
            self._check_open()
            with unavailable(f"cannot read store {self._where}", self._engine):
                self._table.fill(cassette, self._reader.cassette(cassette))
        return len(self._table)

    def key_sent(self, cassette: str, digest: bytes) -> str | None:
        return self._table.key_sent(cassette, digest)

    def unload(self) -> None:
        self._table.drop()

    def lookup(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        held = self._table.get(cassette, key, occurrence)
        if held is not None:
            return held
        # Asked before the read: asked after, an exchange committed between the two would be
        # neither found nor pending.
        pending = self._counters.is_pending(cassette, key, occurrence)
        found = self._read(self._reader.lookup, cassette, key, occurrence)
        if found is None and pending:
            self.flush(PENDING_WAIT_S)
            found = self._read(self._reader.lookup, cassette, key, occurrence)
        return found

    def blob_writer(self) -> BlobWriter:
        put = self._writing().put
        with self._lock:
            self._check_open()
            writer = SpoolWriter(put, self._where)
            # Weakly held: a writer its caller dropped unfinished closes its own spool.
            self._blob_writers.add(writer)
        return writer

    def read_blob(self, ref: BlobRef) -> Iterator[bytes]:
        if ref.size == 0:
            return iter(())
        with self._connect() as conn:
            found = conn.execute(bodies.LAYOUT, {"digest": ref.digest}).first()
        if found is None:
            # A body streamed in is written on the writer thread; it may be queued.
            self.flush(PENDING_WAIT_S)
            with self._connect() as conn:
                found = conn.execute(bodies.LAYOUT, {"digest": ref.digest}).first()
        if found is None:
            raise self._damaged(bodies.Damaged(f"body {ref.digest[:16]} is missing"))
        size, parts, stored, base = found
        if bodies.external(size, parts, stored, base):
            return self._checked(ref, self._ranges(ref))
        if base is not None:
            # Streamed in again after it was stored against a base: small enough to hold.
            with self._connect() as conn:
                try:
                    data = bodies.unchain(conn, ref.digest, stored, base, self._cache)
                except bodies.Damaged as exc:
                    raise self._damaged(exc) from None
            return self._checked(ref, iter((data,)))
        pieces = bodies.whole(ref.digest, stored) if parts == 0 else self._parts(ref, parts)
        return self._checked(ref, pieces)

    def _settled(self, cassette: str) -> None:
        """What this store submitted to ``cassette`` is written, so that a reader of the
        cassette (its listing, the case file) sees everything recorded before it asked, as
        ``lookup`` does; waits no longer than PENDING_WAIT_S, and not at all when nothing is
        pending there."""
        if self._counters.has_pending(cassette):
            with suppress(StoreError):
                self.flush(PENDING_WAIT_S)

    def has_cassette(self, name: str) -> bool:
        if self._counters.has_pending(name):
            return True
        with self._connect() as conn:
            return conn.scalar(_CASSETTE_ID, {"cassette": name}) is not None

    def candidates(
        self, cassette: str, method: str, host: str, path: str, limit: int = 200
    ) -> list[Candidate]:
        path = path.split("?", 1)[0]
        same_path = or_(
            exchanges.c.path == path,
            func.substr(exchanges.c.path, 1, len(path) + 1, type_=ExactText) == path + "?",
        )
        same_host = exchanges.c.host == host
        likeness = case(
            (and_(exchanges.c.method == method, same_host, same_path), 0),
            (and_(same_host, same_path), 1),
            (same_host, 2),
            else_=3,
        )
        ranked = (
            select(*(exchanges.c[name] for name in _CANDIDATE_COLUMNS))
            .join_from(exchanges, cassettes)
            .where(_IN_CASSETTE)
            .order_by(likeness, exchanges.c.seq)
            .limit(limit)
        )
        with self._connect() as conn:
            rows = conn.execute(ranked, {"cassette": cassette}).mappings().all()
            # Fetched apart from the ranking, so the sort does not drag every form along.
            forms = select(*_FORM_COLUMNS).where(exchanges.c.id.in_([row["id"] for row in rows]))
            stored = {form["id"]: form for form in conn.execute(forms).mappings()}
            names = {form["canonical_digest"] for form in stored.values()} - {None}
            try:
                loaded = bodies.load(conn, names, self._cache, whole=True)
            except bodies.Damaged as exc:
                raise self._damaged(exc) from None
        canonical = {row_id: canonical_of(form, loaded) for row_id, form in stored.items()}
        return [
            Candidate(
                seq=row["seq"],
                occurrence=row["occurrence"],
                key=row["key"],
                method=row["method"],
                url=format_url(row["scheme"], row["host"], row["port"], row["path"]),
                canonical=canonical[row["id"]],
            )
            for row in rows
        ]

    def cassette_names(self) -> list[str]:
        with self._connect() as conn:
            return sorted(conn.scalars(select(cassettes.c.name)))

    def cassettes(self, where: ExchangeFilter | None = None) -> list[CassetteSummary]:
        if listings.matching(where):
            with self._connect() as conn:
                return listings.cassette_summaries(conn, where)
        with self._connect() as conn:
            summaries, fresh = listings.counted_summaries(conn)
        if fresh:
            try:
                with self._engine.begin() as conn:
                    listings.save_totals(conn, fresh)
            except SQLAlchemyError as exc:  # a read-only store, or one busy: count next time
                log.debug("cassette totals not kept in %s: %s", self._where, exc)
        return summaries

    def exchanges(
        self,
        cassette: str,
        where: ExchangeFilter | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[ExchangeSummary]:
        self._settled(cassette)
        with self._connect() as conn:
            found = listings.exchange_summaries(conn, cassette, where, offset, limit)
            if not found and conn.scalar(_CASSETTE_ID, {"cassette": cassette}) is None:
                raise CassetteNotFound(cassette, self._where)
        return found

    def overview(self, cassette: str, where: ExchangeFilter | None = None) -> RunOverview:
        self._settled(cassette)
        with self._connect() as conn:
            if conn.scalar(_CASSETTE_ID, {"cassette": cassette}) is None:
                raise CassetteNotFound(cassette, self._where)
            return listings.run_overview(conn, cassette, where)

    def exchange(self, cassette: str, seq: int) -> Exchange:
        self._settled(cassette)
        found = self._read(self._reader.by_seq, cassette, seq)
        if found is not None:
            with self._connect() as conn:
                drift = listings.drift_of(conn, cassette, seq)
            return dataclasses.replace(found, drift=drift)
        if not self.has_cassette(cassette):
            raise CassetteNotFound(cassette, self._where)
        raise ExchangeNotFound(cassette, seq)

    def verify(self, cassette: str) -> VerifyReport:
        with self._connect() as conn:
            return verify_cassette(conn, cassette, self._where, self._cache.objects)

    def rekey(
        self, cassette: str, keyer: Callable[[Exchange], Rekeyed], *, dry_run: bool = False
    ) -> list[KeyChange]:
        self.flush(PENDING_WAIT_S)
        report = self.verify(cassette)
        if not report.ok:
            at = "" if report.first_break is None else f" at exchange {report.first_break}"
            raise StoreError(
                f"cassette {cassette!r}: hash chain broken{at} ({report.detail}); rekey "
                "would re-chain over the break, so it refuses and changes nothing"
            )
        with self._connect() as conn:
            seqs = sorted(conn.scalars(_SEQS, {"cassette": cassette}))
        planned: list[Planned] = []
        for seq in seqs:
            exchange = self._read(self._reader.by_seq, cassette, seq)
            if exchange is None:
                raise StoreError(f"cassette {cassette!r} changed while it was being rekeyed")
            planned.append(
                Planned(
                    seq,
                    exchange.recorded.key,
                    exchange.recorded.slot.occurrence,
                    exchange.recorded.canonical,
                    keyer(exchange),
                )
            )
        if dry_run:
            return rekey.plan(planned)
        return self.write(Rekey(cassette, tuple(planned)))

    def fork_origin(self, cassette: str) -> ForkOrigin | None:
        with self._connect() as conn:
            found = conn.execute(
                select(cassettes.c.origin).where(cassettes.c.name == cassette)
            ).first()
        if found is None:
            raise CassetteNotFound(cassette, self._where)
        return fork_origin_of(found[0])

    def triage_rows(
        self,
        *,
        since: float | None = None,
        cassettes: Sequence[str] | None = None,
        traces: bool = False,
    ) -> list[TriageRow]:
        self.flush(PENDING_WAIT_S)
        with self._connect() as conn:
            names = None if cassettes is None else list(cassettes)
            return triage.triage_rows(conn, since, names, traces)

    def unsigned(self, version: int) -> list[tuple[str, int]]:
        self.flush(PENDING_WAIT_S)
        with self._connect() as conn:
            return list(triage.unsigned(conn, version))

    def rechecks(self) -> dict[str, RecheckResult]:
        with self._connect() as conn:
            return triage.list_rechecks(conn)

    def tape(self, cassette: str) -> TapeRecord | None:
        with self._connect() as conn:
            return triage.read_tape(conn, cassette)

    def notes(self, cassette: str | None = None, seq: int | None = None) -> list[Note]:
        with self._connect() as conn:
            return triage.list_notes(conn, cassette, seq)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unfinished = list(self._blob_writers)
        for writer in unfinished:
            writer.store_closed()
        with self._lock:
            running = self._writer
        if running is not None:
            running.stop()
        self._reader.close()
        self._engine.dispose()
        if self._objects is not None:
            self._objects.close()

    def _writing(self) -> Writer | WriterProcess:
        """The writer, started now if this is the first write."""
        writer = self._writer
        if writer is not None:
            return writer
        with self._lock:
            self._check_open()
            if self._writer is None and self._process_url is not None:
                # Deferred: the write waits in the channel while the process starts, and a
                # process that cannot start is logged and reported by health().
                self._writer = WriterProcess(
                    self._process_url,
                    self._where,
                    self._written,
                    self._counters.moved,
                    self._objects,
                    self._reader_path,
                    wait=False,
                )
            elif self._writer is None:
                self._writer = Writer(
                    self._engine,
                    self._written,
                    self._where,
                    self._counters.moved,
                    objects=self._objects,
                    reader=self._reader_path,
                )
            return self._writer

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(self._where)

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        self._check_open()
        with unavailable(f"cannot read store {self._where}", self._engine):
            with self._engine.connect() as conn:
                yield conn

    def _read(
        self, read: Callable[..., Exchange | None], cassette: str, *args: object
    ) -> Exchange | None:
        self._check_open()
        try:
            with unavailable(f"cannot read store {self._where}", self._engine):
                return read(cassette, *args)
        except bodies.Damaged as exc:
            raise self._damaged(exc) from None

    def _ranges(self, ref: BlobRef) -> Iterator[bytes]:
        """A body in object storage, read a part's worth of bytes at a time (a ranged GET
        each), so that replay's first bytes leave before the last are read."""
        for start in range(0, ref.size, blobs.PART_SIZE):
            try:
                yield bodies.fetched_range(
                    ref.digest, self._cache, start, min(ref.size, start + blobs.PART_SIZE)
                )
            except bodies.Damaged as exc:
                raise self._damaged(exc) from None

    def _parts(self, ref: BlobRef, count: int) -> Iterator[bytes]:
        """A streamed body's parts, each read on a connection of its own, so that a
        reader that stops half way holds no connection or snapshot open."""
        for index in range(count):
            with self._connect() as conn:
                data = bodies.part(conn, ref.digest, index)
            yield data

    def _checked(self, ref: BlobRef, pieces: Iterator[bytes]) -> Iterator[bytes]:
        """``pieces``, then StoreError if they were not the body ``ref`` names."""
        hasher, size = blake3.blake3(), 0
        try:
            for piece in pieces:
                hasher.update(piece)
                size += len(piece)
                yield piece
        except bodies.Damaged as exc:
            raise self._damaged(exc) from None
        if (hasher.hexdigest(), size) != (ref.digest, ref.size):
            what = f"body {ref.digest[:16]} read back does not match its digest and size"
            raise self._damaged(bodies.Damaged(what))

    def _damaged(self, exc: bodies.Damaged) -> StoreError:
        return StoreError(f"{exc}, in store {self._where}; run freezeframe verify")

    def _load_counts(self, cassette: str) -> CassetteCounts:
        counts = CassetteCounts()
        with self._connect() as conn:
            for row in conn.execute(_COUNTS, {"cassette": cassette}).mappings():
                counts.next_occurrence[row["key"]] = row["last_occurrence"] + 1
                counts.recorded[row["key"]] = row["recorded"]
                counts.next_seq = max(counts.next_seq, row["last_seq"] + 1)
        return counts


def _changed(job: Job[object]) -> str | None:
    """The cassette ``job`` rewrites, removes or makes, whose counts and replay table this
    process then reads again; None when it changes none that are counted."""
    if isinstance(job, Rekey | Remove | Import):
        return job.cassette
    return None
