"""4 -> 5: the miss log, provenance and shared replay positions.

See storage.sql.schema for what version 5 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text
from sqlalchemy.schema import CreateColumn

from freezeframe.storage.sql.schema import blobs, cassettes, exchanges, misses, replay_positions

revision = "v5"
down_revision = "v4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_search_and_misses(op.get_bind())


def add_search_and_misses(conn: Connection) -> None:
    """4 -> 5: the miss log and provenance. The search index of version 5 is not made here:
    6 -> 7 builds today's, from the exchanges stored."""
    for table in (misses, replay_positions):
        table.create(conn, checkfirst=True)
    for table, column in ((exchanges, "origin"), (cassettes, "origin"), (blobs, "stored_at")):
        if column not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            definition = CreateColumn(table.c[column]).compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {definition}"))
