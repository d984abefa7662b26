"""4 -> 5: the miss log, provenance and shared replay positions.

The tables and columns are as version 5 made them, frozen here (a revision never imports
today's schema, which later versions change); the step checks what already exists, so one
cut short runs again (storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import (
    Column,
    Connection,
    Double,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    text,
)
from sqlalchemy.schema import CreateColumn

revision = "v5"
down_revision = "v4"
branch_labels = None
depends_on = None

_metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
_misses = Table(
    "misses",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette", Text, nullable=False),
    Column("at", Double, nullable=False),
    Column("kind", String(48), nullable=False),
    Column("method", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("occurrence", Integer, nullable=False),
    Column("recorded", Integer, nullable=False),
    Column("message", Text, nullable=False),
    Column("context", Text, nullable=False),
    Column("nearest", Text, nullable=False),
    Index(None, "cassette", "at"),
)
_replay_positions = Table(
    "replay_positions",
    _metadata,
    Column("session", Text, primary_key=True),
    Column("cassette", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("next", Integer, nullable=False),
)
_origins = (
    Table("exchanges", _metadata, Column("origin", Text)),
    Table("cassettes", _metadata, Column("origin", Text)),
    Table("blobs", _metadata, Column("stored_at", Double)),
)
"""The columns version 5 adds, each on its table."""


def upgrade() -> None:
    add_search_and_misses(op.get_bind())


def add_search_and_misses(conn: Connection) -> None:
    """4 -> 5: the miss log and provenance. The search index of version 5 is not made here:
    6 -> 7 makes today's, which the store fills from the exchanges stored."""
    for table in (_misses, _replay_positions):
        table.create(conn, checkfirst=True)
    for table in _origins:
        [column] = table.c
        if column.name not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            definition = CreateColumn(column).compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {definition}"))
