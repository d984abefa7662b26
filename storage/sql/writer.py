"""The one thread that writes: exchanges queue up and are inserted in batches.

The proxy hands over a finished exchange from its event loop and must not wait
for a disk or a network, so submit() only puts it on a queue that one thread
drains (datasette's ``_send_to_write_thread``). One writer also gives one order:
the hash chain links exchanges in the order this thread inserts them.

A batch is committed when the queue momentarily empties or BATCH_SIZE exchanges
have accumulated. If a batch fails, its exchanges are retried one by one, so one
bad exchange costs only itself; what cannot be written is logged and dropped.

Bodies streamed through a blob writer arrive on the same queue, ahead of the
exchanges that reference them, and are written in a transaction of their own, one
part per statement, so neither side ever holds more than a part. An exchange whose
body could not be written fails on its foreign key rather than dangling.
"""

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, insert, select, update

from storage import blobs
from storage.chain import GENESIS, exchange_digest, link
from storage.errors import StoreClosed, StoreError
from storage.records import BlobRef, NewExchange
from storage.spool import SpooledBlob
from storage.sql.engine import insert_ignore, reason
from storage.sql.rows import chain_fields, exchange_row
from storage.sql.schema import blob_parts, cassettes, exchanges
from storage.sql.schema import blobs as blobs_table

log = logging.getLogger("freezeframe.storage")

BATCH_SIZE = 64

_Item = NewExchange | SpooledBlob | threading.Event | None
"""An exchange or a streamed body to write, a flush marker to set once everything
before it is written, or None: stop after writing everything before it."""


@dataclass(frozen=True)
class _Tip:
    """Where a cassette's chain ends: its row id and the chain value of its last exchange."""

    cassette_id: int
    head: str


class Writer:
    """Owns the writer thread. ``done(exchange, ok)`` is called from that thread
    once an exchange is committed (ok) or given up on (not ok)."""

    def __init__(
        self, engine: Engine, done: Callable[[NewExchange, bool], None], where: str
    ) -> None:
        self._engine = engine
        self._done = done
        self._where = where
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._tips: dict[str, _Tip] = {}
        self._stopping = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name="freezeframe-store-writer", daemon=True
        )
        self._thread.start()

    def put(self, item: NewExchange | SpooledBlob) -> None:
        """Queue an exchange, or a streamed body (which the writer then discards)."""
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
        while True:
            items, stop = self._take()
            batch: list[NewExchange] = []
            markers: list[threading.Event] = []
            for item in items:
                if isinstance(item, NewExchange):
                    batch.append(item)
                elif isinstance(item, SpooledBlob):
                    # Exchanges queued before the body go first; those after may need it.
                    if batch:
                        self._write(batch)
                        batch = []
                    self._store_blob(item)
                else:
                    markers.append(item)
            if batch:
                self._write(batch)
            for marker in markers:
                marker.set()
            if stop:
                return

    def _take(self) -> tuple[list[NewExchange | SpooledBlob | threading.Event], bool]:
        """Block for one item, then take what else is already queued, up to a batch
        of exchanges; True if a stop was taken."""
        items: list[NewExchange | SpooledBlob | threading.Event] = []
        exchanges = 0
        item = self._queue.get()
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
            with self._engine.begin() as conn:
                parts = blob.parts()
                row = {"digest": ref.digest, "size": ref.size, "stored_size": blob.stored_size}
                if blob.count == 1:
                    row |= {"data": next(parts), "parts": 0}
                else:
                    row |= {"data": b"", "parts": blob.count}
                # RETURNING, not rowcount: drivers need not count rows an INSERT skipped.
                insert_row = insert_ignore(self._engine, blobs_table).values(row)
                added = conn.execute(insert_row.returning(blobs_table.c.digest)).first()
                if blob.count > 1 and added is not None:
                    for index, data in enumerate(parts):
                        conn.execute(
                            insert(blob_parts), {"digest": ref.digest, "idx": index, "data": data}
                        )
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

    def _write(self, batch: list[NewExchange]) -> None:
        # Any exception, not only database errors: a malformed exchange must not
        # kill the thread every later exchange depends on.
        try:
            self._commit(batch)
        except Exception as exc:
            if len(batch) == 1:
                self._give_up(batch[0], exc)
                return
            log.error(
                "writing %d exchanges to %s failed, retrying them one by one: %s",
                len(batch),
                self._where,
                reason(exc, self._engine.url),
            )
            for exchange in batch:
                self._write([exchange])
        else:
            for exchange in batch:
                self._done(exchange, True)

    def _give_up(self, exchange: NewExchange, exc: Exception) -> None:
        log.error(
            "could not store exchange %d of cassette %r in %s, dropping it: %s",
            exchange.slot.seq,
            exchange.cassette,
            self._where,
            reason(exc, self._engine.url),
        )
        self._done(exchange, False)

    def _commit(self, batch: list[NewExchange]) -> None:
        """Insert a batch in one transaction, chaining each exchange to the one before.

        Tips advance in a local copy that replaces the known tips only once the
        transaction has committed, so a rolled-back batch leaves no trace.
        """
        tips: dict[str, _Tip] = {}
        bodies: dict[str, bytes] = {}
        rows = []
        with self._engine.begin() as conn:
            for exchange in batch:
                name = exchange.cassette
                tip = tips.get(name) or self._tips.get(name) or self._tip(conn, name)
                response = exchange.response
                row = exchange_row(
                    exchange,
                    tip.cassette_id,
                    _named(exchange.request_body, exchange.request_body_ref, bodies),
                    _named(response.body, response.body_ref, bodies) if response else None,
                )
                head = link(tip.head, exchange_digest(chain_fields(row, name)))
                rows.append(row | {"chain": head})
                tips[name] = _Tip(tip.cassette_id, head)
            self._insert_blobs(conn, bodies)
            conn.execute(insert(exchanges), rows)
            for tip in tips.values():
                conn.execute(
                    update(cassettes).where(cassettes.c.id == tip.cassette_id).values(head=tip.head)
                )
        self._tips.update(tips)

    def _tip(self, conn: Connection, name: str) -> _Tip:
        """Find or create a cassette; read once per cassette, then kept in memory."""
        conn.execute(
            insert_ignore(self._engine, cassettes).values(
                name=name, created_at=time.time(), head=GENESIS
            )
        )
        row = conn.execute(
            select(cassettes.c.id, cassettes.c.head).where(cassettes.c.name == name)
        ).one()
        return _Tip(row.id, row.head)

    def _insert_blobs(self, conn: Connection, bodies: dict[str, bytes]) -> None:
        """Store the bodies the database lacks; those it has are not even compressed."""
        if not bodies:
            return
        present = set(
            conn.scalars(select(blobs_table.c.digest).where(blobs_table.c.digest.in_(bodies)))
        )
        missing = []
        for name, data in bodies.items():
            if name not in present:
                stored = blobs.compress(data)
                missing.append(
                    {"digest": name, "size": len(data), "stored_size": len(stored), "data": stored}
                )
        if missing:
            conn.execute(insert_ignore(self._engine, blobs_table), missing)


def _named(body: bytes, ref: BlobRef | None, bodies: dict[str, bytes]) -> str | None:
    """The digest a row stores for a body (None for an empty one), noting the body
    unless it was streamed in already and ``ref`` names it."""
    if ref is not None:
        if body:
            raise ValueError("a body is given both as bytes and as a BlobRef")
        return ref.digest if ref.size else None
    if not body:
        return None
    name = blobs.digest(body)
    bodies[name] = body
    return name
