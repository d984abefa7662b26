"""2 -> 3: canonical forms stored as blobs.

Frozen as version 3 made it (a revision never imports today's schema); the step checks
what already exists, so one cut short runs again (storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_canonical_digest(op.get_bind())


def add_canonical_digest(conn: Connection) -> None:
    """2 -> 3: canonical forms as blobs. Existing rows keep theirs in ``canonical``."""
    if "canonical_digest" not in {c["name"] for c in inspect(conn).get_columns("exchanges")}:
        # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
        conn.execute(
            text(
                "ALTER TABLE exchanges ADD COLUMN canonical_digest VARCHAR(64) "
                "CONSTRAINT fk_exchanges_canonical_digest REFERENCES blobs (digest)"
            )
        )
