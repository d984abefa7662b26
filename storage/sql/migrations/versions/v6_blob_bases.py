"""5 -> 6: bodies stored as deltas against a base, and the cassette totals.

The tables are as version 6 made them, frozen here (a revision never imports today's
schema, which later versions change); the step checks what already exists, so one cut
short runs again (storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    inspect,
    text,
)

revision = "v6"
down_revision = "v5"
branch_labels = None
depends_on = None

_cassette_totals = Table(
    "cassette_totals",
    MetaData(naming_convention={"pk": "pk_%(table_name)s"}),
    Column("cassette_id", Integer, primary_key=True, autoincrement=False),
    Column("head", String(64), nullable=False),
    Column("exchanges", Integer, nullable=False),
    Column("first_at", Double),
    Column("last_at", Double),
    Column("stored_bytes", BigInteger, nullable=False),
)


def upgrade() -> None:
    add_blob_bases(op.get_bind())


def add_blob_bases(conn: Connection) -> None:
    """5 -> 6: bodies stored against a base (existing bodies are stored on their own), and
    the cassette totals ``ls`` reads."""
    _cassette_totals.create(conn, checkfirst=True)
    present = {c["name"] for c in inspect(conn).get_columns("blobs")}
    if "base" not in present:
        # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
        conn.execute(
            text(
                "ALTER TABLE blobs ADD COLUMN base VARCHAR(64) "
                "CONSTRAINT fk_blobs_base REFERENCES blobs (digest)"
            )
        )
    if "depth" not in present:
        conn.execute(text("ALTER TABLE blobs ADD COLUMN depth INTEGER"))
