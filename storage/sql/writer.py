"""The one thread that writes: exchanges queue up and are inserted in batches.

The proxy hands over a finished exchange from its event loop and must not wait
for a disk or a network, so submit() only puts it on a queue that one thread
drains (datasette's ``_send_to_write_thread``). One writer also gives one order:
the hash chain links exchanges in the order this thread inserts them.

A batch is committed when the queue momentarily empties or BATCH_SIZE exchanges
have accumulated. If a batch fails, its exchanges are retried one by one, so one
bad exchange costs only itself; what cannot be written is logged and dropped.
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
from storage.records import NewExchange
from storage.sql.engine import insert_ignore, reason
from storage.sql.rows import chain_fields, exchange_row
from storage.sql.schema import blobs as blobs_table
from storage.sql.schema import cassettes, exchanges

log = logging.getLogger("freezeframe.storage")

BATCH_SIZE = 64

_Item = NewExchange | threading.Event | None
"""An exchange to write, a flush marker to set once everything before it is
written, or None: stop after writing everything before it."""


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

    def put(self, exchange: NewExchange) -> None:
        with self._lock:
            if self._stopping:
                raise StoreClosed(self._where)
            self._queue.put(exchange)

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
            batch, markers, stop = self._take()
            if batch:
                self._write(batch)
            for marker in markers:
                marker.set()
            if stop:
                return

    def _take(self) -> tuple[list[NewExchange], list[threading.Event], bool]:
        """Block for one item, then take what else is already queued, up to a batch."""
        batch: list[NewExchange] = []
        markers: list[threading.Event] = []
        item = self._queue.get()
        while True:
            if item is None:
                return batch, markers, True
            if isinstance(item, threading.Event):
                markers.append(item)
            else:
                batch.append(item)
            if len(batch) >= BATCH_SIZE:
                return batch, markers, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, markers, False

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
                response_body = exchange.response.body if exchange.response else b""
                row = exchange_row(
                    exchange,
                    tip.cassette_id,
                    _named(exchange.request_body, bodies),
                    _named(response_body, bodies),
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


def _named(body: bytes, bodies: dict[str, bytes]) -> str | None:
    """The digest a row stores for a body (None for an empty one), noting the body."""
    if not body:
        return None
    name = blobs.digest(body)
    bodies[name] = body
    return name
