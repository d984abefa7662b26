"""Reaching a store's database behind its back, to tamper with it or hold it still."""

from __future__ import annotations

import sqlite3
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
