"""From a store URL to a ready Engine, and from SQLAlchemy's errors to the store's.

This is the only module that knows which database is behind a URL: it picks the
driver, sets SQLite's pragmas, creates SQLite's directory, and builds the
dialect's insert-if-absent. Everything else in storage.sql is portable SQL.
"""

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import URL, Connection, Engine, Insert, Table, create_engine, event, make_url
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from freezeframe.storage.errors import StoreNotFound, StoreUnavailable
from freezeframe.storage.filemode import create_private
from freezeframe.storage.sql.versioning import ensure_schema

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

_DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}

_USAGE = "use sqlite:///PATH or postgresql://USER@HOST/DATABASE"

SQLITE_BUSY_TIMEOUT_MS = 10_000
POSTGRESQL_CONNECT_TIMEOUT_S = 10


def connect(url: str, *, create: bool = True) -> Engine:
    """An Engine for ``url`` whose schema exists and is not newer than this code.

    Raises StoreUnavailable (with the password masked) when the URL is not a store
    URL or the database cannot be reached, StoreNotFound when ``create`` is False and
    there is no store there yet, and SchemaTooNew.
    """
    where = mask(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreUnavailable(f"cannot open store at {where}: not a store URL; {_USAGE}") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise StoreUnavailable(
            f"cannot open store at {where}: unsupported backend {parsed.drivername!r}; {_USAGE}"
        )
    parsed = parsed.set(drivername=driver)
    if driver.startswith("sqlite"):
        engine = _sqlite(parsed, where, create)
    else:
        engine = _postgresql(parsed, where)
    try:
        with unavailable(f"cannot open store at {where}", engine), engine.begin() as conn:
            ensure_schema(conn, where, create)
    except BaseException:
        engine.dispose()
        raise
    return engine


def mask(url: str) -> str:
    """The URL with its password replaced by ***, even when it does not parse."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


@contextmanager
def unavailable(what: str, engine: Engine) -> Iterator[None]:
    """Re-raise database errors as StoreUnavailable("<what>: <one-line reason>"),
    whether SQLAlchemy's or, from statements run on the driver, the driver's own."""
    try:
        yield
    except (SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise StoreUnavailable(f"{what}: {reason(exc, engine.url)}") from exc


def reason(exc: BaseException, url: URL) -> str:
    """The first line of the driver's message, without the password."""
    original = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(original).splitlines() if line.strip()]
    text = lines[0] if lines else type(original).__name__
    return text.replace(url.password, "***") if url.password else text


def insert_ignore(engine: Engine, table: Table) -> Insert:
    """INSERT that silently skips rows whose primary or unique key already exists."""
    return dialect_insert(engine.dialect.name, table).on_conflict_do_nothing()


def dialect_insert(dialect: str, table: Table) -> "sqlite.Insert | postgresql.Insert":
    """The dialect's own INSERT, which can say what to do on a conflict.

    SQLAlchemy's PostgreSQL dialect is imported only for a PostgreSQL store: it costs a
    SQLite store's start about 30 ms of CPU (a tenth of the store's share of start-up).
    """
    if dialect == "sqlite":
        return sqlite.insert(table)
    from sqlalchemy.dialects import postgresql

    return postgresql.insert(table)


@contextmanager
def exclusive(engine: Engine) -> Iterator[Connection]:
    """A transaction that other writers wait for from its first statement on: SQLite's
    write lock is taken at once (BEGIN IMMEDIATE), so a read in it cannot go stale
    before its writes. On PostgreSQL the caller locks the rows it rewrites (FOR UPDATE)."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        yield conn


def _sqlite(url: URL, where: str, create: bool) -> Engine:
    database = url.database or ""
    if database in {"", ":memory:"} or url.query.get("mode") == "memory":
        raise StoreUnavailable(
            f"cannot open store at {where}: an in-memory SQLite store is lost with its "
            "connection; give a file path"
        )
    if not create and not Path(database).is_file():
        raise StoreNotFound(f"no store at {database}")
    directory = Path(database).parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot open store at {where}: cannot create directory {directory}: "
            f"{exc.strerror or exc}"
        ) from exc
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StoreUnavailable(
            f"cannot open store at {where}: directory {directory} is not writable"
        )
    if database != "" and not database.startswith("file:"):
        try:
            create_private(Path(database))  # SQLite would create it 0644 (umask permitting)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot open store at {where}: cannot create {database}: {exc.strerror or exc}"
            ) from exc
    engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _postgresql(url: URL, where: str) -> Engine:
    try:
        return create_engine(
            url,
            pool_pre_ping=True,
            connect_args={
                "connect_timeout": POSTGRESQL_CONNECT_TIMEOUT_S,
                "application_name": "freezeframe",
            },
        )
    except ImportError:
        raise StoreUnavailable(
            f"cannot open store at {where}: PostgreSQL support is not installed; "
            "pip install 'freezeframe[postgres]'"
        ) from None


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    """WAL lets the proxy's reads run while the writer thread writes; NORMAL sync is
    durable across process crashes, which is what a SIGTERM'd proxy needs."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()
