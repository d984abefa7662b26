"""Statements compiled once and run on the driver's cursor, for the hot paths.

Running a statement through SQLAlchemy costs tens of microseconds of Python before
the database sees it (cache key, parameter processing, result objects): more than
SQLite takes to insert an exchange or find a recording. So the writer's statements
and the replay lookup are compiled once per store into the driver's own SQL and
run on a DBAPI cursor. The one type that converts values on the way, ExactText, is
applied here; the others pass through the drivers unchanged.

Reads on the hot path also keep their connection: PinnedConnections holds one per
thread between calls, which spares a pool checkout each time, and on PostgreSQL the
liveness ping and the ROLLBACK that would otherwise go with it.
"""

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Dialect, Engine, Select
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from freezeframe.storage.sql.schema import ExactText, from_stored, to_stored

Row = tuple[Any, ...]
T = TypeVar("T")

PINNED_LIMIT = 4
"""Threads that keep a read connection; others check one out per call. Well under the
pool's size, so pinned connections never starve the rest of the store."""


class Prepared:
    """One statement in the driver's SQL, with how to pass its parameters.

    ``columns`` compiles an INSERT for exactly those columns, to be run with
    executemany(). Parameters are given by name; constants that the statement
    itself binds are filled in.
    """

    def __init__(
        self, statement: ClauseElement, dialect: Dialect, columns: Sequence[str] | None = None
    ) -> None:
        compiled = statement.compile(
            dialect=dialect, column_keys=columns, for_executemany=columns is not None
        )
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        constants = compiled.construct_params(_check=False) or {}
        self._constants = {name: value for name, value in constants.items() if value is not None}
        texts = {name for name, bind in compiled.binds.items() if isinstance(bind.type, ExactText)}
        self._texts = frozenset(texts)
        order = compiled.positiontup if compiled.positional else None
        self._order = None if order is None else tuple((name, name in texts) for name in order)
        self._text_results: tuple[int, ...] = ()
        if isinstance(statement, Select):
            self._text_results = tuple(
                index
                for index, column in enumerate(statement.selected_columns)
                if isinstance(column.type, ExactText)
            )

    def parameters(self, values: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        if self._constants:
            values = self._constants | dict(values)
        if self._order is not None:
            return tuple(
                to_stored(values[name]) if text else values[name] for name, text in self._order
            )
        return {
            name: to_stored(value) if name in self._texts else value
            for name, value in values.items()
        }

    def execute(self, cursor: DBAPICursor, values: Mapping[str, Any]) -> None:
        cursor.execute(self.sql, self.parameters(values))

    def executemany(self, cursor: DBAPICursor, rows: Sequence[Mapping[str, Any]]) -> None:
        if len(rows) == 1:
            # psycopg's executemany() costs more than execute() for one row.
            self.execute(cursor, rows[0])
            return
        parameters: Any = [self.parameters(row) for row in rows]
        cursor.executemany(self.sql, parameters)

    def first(self, cursor: DBAPICursor, values: Mapping[str, Any]) -> Row | None:
        """The first row of a SELECT, ExactText columns decoded; the rest is discarded."""
        cursor.execute(self.sql, self.parameters(values))
        row = cursor.fetchone()
        return None if row is None else self.decoded(row)

    def all(self, cursor: DBAPICursor, values: Mapping[str, Any]) -> list[Row]:
        cursor.execute(self.sql, self.parameters(values))
        return [self.decoded(row) for row in cursor.fetchall()]

    def decoded(self, row: Sequence[Any]) -> Row:
        if not self._text_results:
            return tuple(row)
        values = list(row)
        for index in self._text_results:
            if values[index] is not None:  # most fact columns are NULL
                values[index] = from_stored(values[index])
        return tuple(values)


class _Pin:
    """A thread's kept connection. Only its thread-local holds it strongly, so it goes
    back to the pool when its thread ends, or when the store closes, if sooner."""

    def __init__(self, owner: "PinnedConnections", connection: PoolProxiedConnection) -> None:
        self.connection = connection
        self.in_use = False
        self.used = False
        """Whether a call has run on it already."""
        self.released = False
        # No reference to the pin itself, or it would never be collected.
        self.finalizer = weakref.finalize(self, owner.release_connection, connection)
        self.finalizer.atexit = False


class PinnedConnections:
    """Connections for short reads, one kept per thread (up to PINNED_LIMIT threads).

    Each run() is one statement's worth of work outside any transaction: SQLite
    reads in autocommit mode, and on PostgreSQL a kept connection is in autocommit,
    so a read holds no snapshot after it returns. A connection whose statement failed
    in the driver is discarded; if it had been kept from an earlier call (it may have
    died with the server since), the work is run once more on a fresh one.
    """

    def __init__(self, engine: Engine, limit: int = PINNED_LIMIT) -> None:
        self._engine = engine
        self._driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._postgresql = engine.dialect.name == "postgresql"
        self._limit = limit
        self._local = threading.local()
        self._pins: weakref.WeakSet[_Pin] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def run(self, work: Callable[[DBAPICursor], T]) -> T:
        """``work`` done with a cursor on this thread's connection; the driver's errors
        are raised as they are."""
        pin = self._pin()
        if pin is not None and pin.used:
            try:
                return self._run(work, pin, pin.connection)
            except self._driver_error:
                pin = self._pin()  # the failed one was discarded
        return self._run(work, pin, pin.connection if pin is not None else self._checkout())

    def _run(
        self,
        work: Callable[[DBAPICursor], T],
        pin: "_Pin | None",
        connection: PoolProxiedConnection,
    ) -> T:
        try:
            cursor = connection.cursor()
            try:
                result = work(cursor)
            finally:
                cursor.close()
        except self._driver_error:
            self._discard(pin, connection)
            raise
        except BaseException:
            self._done(pin, connection)
            raise
        self._done(pin, connection)
        return result

    def close(self) -> None:
        """Give back every kept connection; one in use goes back when its call ends."""
        with self._lock:
            self._closed = True
            idle = [pin for pin in self._pins if not pin.in_use]
        for pin in idle:
            self._unpin(pin)

    def release_connection(self, connection: PoolProxiedConnection) -> None:
        """Return a connection checked out here to the pool, as it was found."""
        try:
            if self._postgresql:
                connection.driver_connection.autocommit = False  # type: ignore[union-attr]
            connection.close()
        except Exception:
            connection.invalidate()

    def _checkout(self) -> PoolProxiedConnection:
        connection = self._engine.raw_connection()
        if self._postgresql:
            try:
                connection.rollback()  # the pool's liveness ping may have begun one
                connection.driver_connection.autocommit = True  # type: ignore[union-attr]
            except BaseException:
                connection.invalidate()
                raise
        return connection

    def _pin(self) -> _Pin | None:
        """This thread's kept connection, marked in use; None if it may not keep one."""
        pin: _Pin | None = getattr(self._local, "pin", None)
        with self._lock:
            if self._closed:
                return None
            if pin is not None and not pin.released:
                pin.in_use = True
                return pin
            if len(self._pins) >= self._limit:
                return None
        pin = _Pin(self, self._checkout())
        with self._lock:
            if self._closed or len(self._pins) >= self._limit:
                pin.released = True
                pin.finalizer()
                return None
            self._pins.add(pin)
            pin.in_use = True
        self._local.pin = pin
        return pin

    def _done(self, pin: _Pin | None, connection: PoolProxiedConnection) -> None:
        if pin is None:
            self.release_connection(connection)
            return
        with self._lock:
            pin.in_use = False
            pin.used = True
            closed = self._closed
        if closed:
            self._unpin(pin)

    def _unpin(self, pin: _Pin) -> None:
        with self._lock:
            self._pins.discard(pin)
            pin.released = True
        pin.finalizer()

    def _discard(self, pin: _Pin | None, connection: PoolProxiedConnection) -> None:
        if pin is not None:
            with self._lock:
                self._pins.discard(pin)
                pin.released = True
            pin.finalizer.detach()
        try:
            connection.invalidate()
        except Exception:
            pass
