"""7 -> 8: triage's signals on exchanges, the index of the failing ones, and case notes.

See storage.sql.schema for what version 8 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, inspect, text
from sqlalchemy.schema import CreateColumn

from freezeframe.storage.sql.schema import SIGNALS, create_triage_index, exchanges, notes

revision = "v8"
down_revision = "v7"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_signals_and_notes(op.get_bind())


def add_signals_and_notes(conn: Connection) -> None:
    """7 -> 8: triage's signals and case notes. Existing rows get NULL signals: working
    them out needs code the store does not have (``freezeframe triage --rebuild``)."""
    present = {c["name"] for c in inspect(conn).get_columns(exchanges.name)}
    for name in SIGNALS:
        if name not in present:
            definition = CreateColumn(exchanges.c[name]).compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE {exchanges.name} ADD COLUMN {definition}"))
    create_triage_index(conn)
    notes.create(conn, checkfirst=True)
