"""1 -> 2: bodies streamed in parts.

The tables are as version 2 made them, frozen here (a revision never imports today's
schema, which later versions change); the step checks what already exists, so one cut short
runs again (storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import (
    Column,
    Connection,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    inspect,
    text,
)
from sqlalchemy.schema import CreateColumn

revision = "v2"
down_revision = "v1"
branch_labels = None
depends_on = None

_metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
_blobs = Table(
    "blobs",
    _metadata,
    Column("digest", String(64), primary_key=True),
    Column("parts", Integer, nullable=False, server_default=text("0")),
)
_blob_parts = Table(
    "blob_parts",
    _metadata,
    Column("digest", ForeignKey("blobs.digest"), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)


def upgrade() -> None:
    add_blob_parts(op.get_bind())


def add_blob_parts(conn: Connection) -> None:
    """1 -> 2: bodies streamed in parts. Existing bodies get parts = 0: stored whole."""
    if "parts" not in {column["name"] for column in inspect(conn).get_columns("blobs")}:
        definition = CreateColumn(_blobs.c.parts).compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE blobs ADD COLUMN {definition}"))
    _blob_parts.create(conn, checkfirst=True)
