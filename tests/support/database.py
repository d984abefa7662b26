"""Reaching a store's database behind its back, to tamper with it or hold it still."""

from __future__ import annotations

import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy

from freezeframe.storage import blobs


def run_sql(url: str, *statements: str, **params: Any) -> list[Any]:
    """Execute raw SQL behind the store's back (foreign keys not enforced); the last
    statement's rows, if it returns any."""
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            result = None
            for statement in statements:
                result = conn.execute(sqlalchemy.text(statement), params)
            return list(result) if result is not None and result.returns_rows else []
    finally:
        engine.dispose()


@contextmanager
def writes_blocked(url: str) -> Iterator[None]:
    """Hold the database's write lock, so the store's writer waits until the block ends."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.rollback()
            conn.close()
    else:
        conninfo = url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(conninfo, connect_timeout=3) as pg:
            pg.execute("LOCK TABLE cassettes, blobs, blob_parts, exchanges IN EXCLUSIVE MODE")
            yield
            pg.rollback()


def terminate_freezeframe_backends(url: str) -> int:
    """Have the PostgreSQL server at ``url`` drop every connection a store holds to its
    database; how many it dropped."""
    conninfo = url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(conninfo, autocommit=True) as admin:
        rows: list[Any] = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'freezeframe' AND datname = current_database()"
        ).fetchall()
    return len(rows)


COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"
"""psycopg's commit on the wire: a simple-protocol Query message of ``COMMIT``."""


class AnswerLosingRelay:
    """A TCP relay in front of the PostgreSQL server. Once armed, it lets the next COMMIT
    through to the server, waits for the server's answer, and drops the client's connection
    instead of passing that answer on: the transaction is committed, and the client never
    hears so (a network or a server that fails at the worst moment, made to happen on
    purpose). Connect through it with ``sslmode=disable``, so the messages can be read."""

    def __init__(self, server: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self._server = server
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.armed = threading.Event()
        self.tripped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, postgres_url: str) -> str:
        """``postgres_url`` (a store URL on 127.0.0.1:5432) reached through this relay."""
        return postgres_url.replace(":5432/", f":{self.port}/") + "?sslmode=disable"

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._server, timeout=10)
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            committing = threading.Event()
            threading.Thread(
                target=self._pump, args=(client, server, committing, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, committing, False), daemon=True
            ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, committing: threading.Event, up: bool
    ) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            if up and COMMIT in data and self.armed.is_set():
                self.armed.clear()
                committing.set()
            elif not up and committing.is_set():
                # The server's answer to the COMMIT: committed. The client never hears it.
                self.tripped.set()
                break
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def stored_bodies(path: Path) -> list[bytes]:
    """Every body a SQLite store's ``blobs`` table holds whole, as it was sent: what anyone
    who reads the file can recover (a body stored as a delta is applied to its base)."""
    with closing(sqlite3.connect(path)) as db:
        rows = {
            digest: (data, base)
            for digest, data, base in db.execute("SELECT digest, data, base FROM blobs")
        }
    decoded: dict[str, bytes] = {}

    def body(digest: str) -> bytes:
        if digest not in decoded:
            data, base = rows[digest]
            decoded[digest] = (
                blobs.decompress(data)
                if base is None
                else blobs.decompress_against(data, body(base))
            )
        return decoded[digest]

    return [body(digest) for digest in rows]
