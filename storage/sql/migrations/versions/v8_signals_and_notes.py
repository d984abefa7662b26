"""7 -> 8: triage's signals on exchanges, the index of the failing ones, and case notes.

The tables and columns are as version 8 made them, frozen here (a revision never imports
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

revision = "v8"
down_revision = "v7"
branch_labels = None
depends_on = None

_metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
_exchanges = Table(
    "exchanges",
    _metadata,
    Column("failure_kind", String(24)),
    Column("signature", Text),
    Column("trace", Text),
    Column("signature_version", Integer),
    Column("run_failures", Text),
)
_notes = Table(
    "notes",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette", Text, nullable=False),
    Column("seq", Integer),
    Column("at", Double, nullable=False),
    Column("text", Text, nullable=False),
    Index(None, "cassette", "seq"),
)
_TRIAGE_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_exchanges_triage ON exchanges (cassette_id, seq) "
    "WHERE failure_kind IS NOT NULL OR run_failures IS NOT NULL"
)


def upgrade() -> None:
    add_signals_and_notes(op.get_bind())


def add_signals_and_notes(conn: Connection) -> None:
    """7 -> 8: triage's signals and case notes. Existing rows get NULL signals: working
    them out needs code the store does not have (``freezeframe triage --rebuild``)."""
    present = {c["name"] for c in inspect(conn).get_columns("exchanges")}
    for column in _exchanges.c:
        if column.name not in present:
            definition = CreateColumn(column).compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE exchanges ADD COLUMN {definition}"))
    conn.exec_driver_sql(_TRIAGE_INDEX)
    _notes.create(conn, checkfirst=True)
