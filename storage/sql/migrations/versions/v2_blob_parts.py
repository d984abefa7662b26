"""1 -> 2: bodies streamed in parts.

See storage.sql.schema for what version 2 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text
from sqlalchemy.schema import CreateColumn

from freezeframe.storage.sql.schema import blob_parts, blobs

revision = "v2"
down_revision = "v1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_blob_parts(op.get_bind())


def add_blob_parts(conn: Connection) -> None:
    """1 -> 2: bodies streamed in parts. Existing bodies get parts = 0: stored whole."""
    if "parts" not in {column["name"] for column in inspect(conn).get_columns(blobs.name)}:
        definition = CreateColumn(blobs.c.parts).compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE {blobs.name} ADD COLUMN {definition}"))
    blob_parts.create(conn, checkfirst=True)
