"""5 -> 6: bodies stored as deltas against a base, and the cassette totals.

See storage.sql.schema for what version 6 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text

from freezeframe.storage.sql.schema import blobs, cassette_totals

revision = "v6"
down_revision = "v5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_blob_bases(op.get_bind())


def add_blob_bases(conn: Connection) -> None:
    """5 -> 6: bodies stored against a base (existing bodies are stored on their own), and
    the cassette totals ``ls`` reads."""
    cassette_totals.create(conn, checkfirst=True)
    present = {c["name"] for c in inspect(conn).get_columns(blobs.name)}
    if "base" not in present:
        # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
        conn.execute(
            text(
                f"ALTER TABLE {blobs.name} ADD COLUMN base VARCHAR(64) "
                f"CONSTRAINT fk_{blobs.name}_base REFERENCES {blobs.name} (digest)"
            )
        )
    if "depth" not in present:
        conn.execute(text(f"ALTER TABLE {blobs.name} ADD COLUMN depth INTEGER"))
