"""A store's schema version: created at the head, an older one migrated, a newer one refused.

A store's ``meta`` row ``schema_version`` stays the version a freezeframe checks first, so an
older freezeframe still refuses a newer store (SchemaTooNew) instead of misreading it. The
steps from one version to the next are Alembic revisions (storage.sql.migrations, frozen: they
import nothing of today's store), and Alembic's ``alembic_version`` table says which one a
store is at. A store from before Alembic (it has no such table), or one whose
``schema_version`` was left behind by a migration cut short, is taken at its
``schema_version``: stamped ``vN`` and upgraded from there, each step checking what already
exists, so a step cut short runs again. A new store is created whole from storage.sql.schema's
tables and stamped at the head, as Alembic's documentation recommends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    insert,
    inspect,
    select,
    update,
)

from freezeframe.storage.errors import SchemaTooNew, StoreNotFound
from freezeframe.storage.sql.migrations import LOCATION
from freezeframe.storage.sql.schema import (
    SCHEMA_VERSION,
    create_search,
    create_triage_index,
    meta,
    metadata,
)

if TYPE_CHECKING:
    from alembic.config import Config

HEAD = f"v{SCHEMA_VERSION}"
"""The revision a store of this freezeframe's schema version is at."""

_VERSION = select(meta.c.value).where(meta.c.name == "schema_version")

revisions = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
"""Alembic's own table, as alembic.runtime.migration defines it: a new store is stamped and a
current one read through it without loading Alembic (tests/storage/test_migrations.py checks
that Alembic reads what is written here)."""


def ensure_schema(conn: Connection, where: str, create: bool = True) -> None:
    """Create the tables on first use (unless ``create`` is False: then StoreNotFound),
    migrate an older store forward, and refuse one written by a newer schema."""
    if inspect(conn).has_table(meta.name):
        found = conn.scalar(_VERSION)
        if found is not None:
            if int(found) > SCHEMA_VERSION:
                raise SchemaTooNew(int(found), SCHEMA_VERSION, where)
            if int(found) < SCHEMA_VERSION or revision(conn) != HEAD:
                _migrate(conn)
            return
    if not create:
        raise StoreNotFound(f"no freezeframe store in {where}")
    metadata.create_all(conn)
    create_search(conn)
    create_triage_index(conn)
    conn.execute(insert(meta).values(name="schema_version", value=str(SCHEMA_VERSION)))
    revisions.create(conn)
    conn.execute(insert(revisions).values(version_num=HEAD))


def revision(conn: Connection) -> str | None:
    """The Alembic revision the store is at; None for a store from before Alembic. Read
    with SQL, so that opening a current store never loads Alembic."""
    if not inspect(conn).has_table(revisions.name):
        return None
    found = conn.scalar(select(revisions.c.version_num))
    return str(found) if found is not None else None


def _migrate(conn: Connection) -> None:
    """Upgrade the store from its ``schema_version`` to HEAD, in the caller's transaction.
    The version is re-read under a row lock, so that of two processes opening an old
    PostgreSQL store at once, the second finds it migrated."""
    version = int(conn.scalar(_VERSION.with_for_update()) or SCHEMA_VERSION)
    if version == SCHEMA_VERSION and revision(conn) == HEAD:
        return
    from alembic import command  # only a store to migrate pays for importing it

    config = _config(conn)
    command.stamp(config, f"v{version}", purge=True)
    command.upgrade(config, "head")
    conn.execute(
        update(meta).where(meta.c.name == "schema_version").values(value=str(SCHEMA_VERSION))
    )


def _config(conn: Connection) -> Config:
    """Alembic's configuration, run on ``conn`` (storage/sql/migrations/env.py)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(LOCATION))
    config.attributes["connection"] = conn
    return config
