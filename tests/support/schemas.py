"""A store's schema as the database reports it, to compare a migrated store with a new one;
and version 1's tables as they were released, to build the oldest stores from."""

from __future__ import annotations

import re
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

import psycopg
import sqlalchemy
from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from freezeframe.storage import open_store

__all__ = ["V1", "new_store_schema", "schema_built_beside", "schema_of", "v1_schema_beside"]

V1 = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
"""The version-1 schema, frozen as it was released (kept apart from the v1 revision's own
copy, so that each checks the other)."""

Table(
    "meta",
    V1,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
Table(
    "cassettes",
    V1,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("created_at", Double, nullable=False),
    Column("head", String(64), nullable=False),
)
Table(
    "blobs",
    V1,
    Column("digest", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("stored_size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
Table(
    "exchanges",
    V1,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette_id", ForeignKey("cassettes.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("occurrence", Integer, nullable=False),
    Column("key", Text, nullable=False),
    Column("key_scheme", Integer, nullable=False),
    Column("canonical", LargeBinary, nullable=False),
    Column("method", Text, nullable=False),
    Column("scheme", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("port", Integer, nullable=False),
    Column("path", Text, nullable=False),
    Column("http_version", Text, nullable=False),
    Column("request_headers", Text, nullable=False),
    Column("request_body_digest", ForeignKey("blobs.digest")),
    Column("started_at", Double, nullable=False),
    Column("duration", Double),
    Column("status", Integer),
    Column("reason", Text),
    Column("response_http_version", Text),
    Column("response_headers", Text),
    Column("response_trailers", Text),
    Column("response_body_digest", ForeignKey("blobs.digest")),
    Column("response_bytes", BigInteger, nullable=False),
    Column("chunks", Text),
    Column("first_byte_at", Double),
    Column("outcome", String(16), nullable=False),
    Column("error", Text),
    Column("context", Text, nullable=False),
    Column("chain", String(64), nullable=False),
    UniqueConstraint("cassette_id", "seq"),
    UniqueConstraint("cassette_id", "key", "occurrence"),
)

# A foreign key added with its column (SQLite adds one to a table no other way) is named
# inline, "col TYPE CONSTRAINT name REFERENCES t (c)", which SQLAlchemy does not reflect.
_INLINE_FOREIGN_KEY = re.compile(r'[(,]\s*"?(\w+)"?\s[^,]*?\bCONSTRAINT\s+"?(\w+)"?\s+REFERENCES')


def schema_of(url: str) -> dict[str, str]:
    """Every table of the store at ``url`` (Alembic's own left out) with its columns (type,
    nullability, default; in any order, since a column a migration adds comes last), primary
    key, foreign keys, unique constraints and indexes, each with its name; the full-text
    tables (SQLite's FTS5 table and its shadow tables, PostgreSQL's tsvector column and GIN
    index); and each index and special table as the database itself spells it. One entry
    each, so that a difference names what differs."""
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            found = sqlalchemy.inspect(conn)
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:
                rows = conn.exec_driver_sql(
                    "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                ).all()
                spelled = {name: " ".join(sql.split()) for _, name, sql in rows}
                special = {
                    name: spelled[name]
                    for kind, name, sql in rows
                    if kind == "index" or "VIRTUAL TABLE" in sql or "WITHOUT ROWID" in sql
                }
            else:
                special = dict(
                    conn.exec_driver_sql(
                        "SELECT indexname, indexdef FROM pg_indexes"
                        " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
                    ).all()
                )
            schema = {f"as spelled: {name}": sql for name, sql in special.items()}
            for table in found.get_table_names():
                if table == "alembic_version":
                    continue
                inline = dict(_INLINE_FOREIGN_KEY.findall(spelled[table])) if sqlite else {}
                schema[f"{table}"] = "table"
                for c in found.get_columns(table):
                    null = "NULL" if c["nullable"] else "NOT NULL"
                    schema[f"{table}.{c['name']}"] = f"{c['type']!r} {null} default {c['default']}"
                pk = found.get_pk_constraint(table)
                schema[f"{table} primary key"] = f"{pk['name']} {pk['constrained_columns']}"
                for fk in found.get_foreign_keys(table):
                    name = fk["name"] or inline.get(fk["constrained_columns"][0])
                    schema[f"{table} foreign key {fk['constrained_columns']}"] = (
                        f"{name} -> {fk['referred_table']} {fk['referred_columns']}"
                    )
                for unique in found.get_unique_constraints(table):
                    schema[f"{table} unique {unique['column_names']}"] = str(unique["name"])
                for index in found.get_indexes(table):
                    options = sorted((k, str(v)) for k, v in index["dialect_options"].items())
                    schema[f"{table} index {index['name']}"] = (
                        f"{index['column_names']} unique={index['unique']} {options}"
                    )
            return schema
    finally:
        engine.dispose()


def new_store_schema(url: str) -> dict[str, str]:
    """The schema of a store created new beside ``url`` (see schema_built_beside)."""
    return schema_built_beside(url, lambda fresh: open_store(fresh).close())


def v1_schema_beside(url: str) -> dict[str, str]:
    """The schema of version 1's tables as released, created beside ``url``."""

    def create(fresh: str) -> None:
        engine = sqlalchemy.create_engine(fresh)
        try:
            with engine.begin() as conn:
                V1.create_all(conn)
        finally:
            engine.dispose()

    return schema_built_beside(url, create)


def schema_built_beside(url: str, build: Callable[[str], object]) -> dict[str, str]:
    """The schema ``build`` makes in a database of its own on the server of ``url`` (for
    SQLite, in a file of its own), which is dropped afterwards."""
    if url.startswith("sqlite"):
        with tempfile.TemporaryDirectory() as directory:
            fresh = f"sqlite:///{Path(directory) / 'new.db'}"
            build(fresh)
            return schema_of(fresh)
    parsed = sqlalchemy.make_url(url)
    name = f"ff_new_{secrets.token_hex(6)}"
    server = parsed.set(drivername="postgresql", database="postgres")
    with psycopg.connect(server.render_as_string(hide_password=False), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            fresh = parsed.set(database=name).render_as_string(hide_password=False)
            build(fresh)
            return schema_of(fresh)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
