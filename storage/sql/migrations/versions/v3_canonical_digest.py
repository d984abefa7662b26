"""2 -> 3: canonical forms stored as blobs.

See storage.sql.schema for what version 3 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text

from freezeframe.storage.sql.schema import blobs, exchanges

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_canonical_digest(op.get_bind())


def add_canonical_digest(conn: Connection) -> None:
    """2 -> 3: canonical forms as blobs. Existing rows keep theirs in ``canonical``."""
    if "canonical_digest" not in {c["name"] for c in inspect(conn).get_columns(exchanges.name)}:
        # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
        column = exchanges.c.canonical_digest
        conn.execute(
            text(
                f"ALTER TABLE {exchanges.name} ADD COLUMN {column.name} VARCHAR(64) "
                f"CONSTRAINT fk_{exchanges.name}_{column.name} REFERENCES {blobs.name} (digest)"
            )
        )
