"""9 -> 10: exchanges indexed by their start time, and each cassette's failures counted.

See storage.sql.schema for what version 10 holds. Search lists the exchanges holding a value
newest first; a value most exchanges hold (a model's name, a host) is then found by reading
the exchanges newest first and stopping at the page's end, which only an index on the start
time allows. ``cassette_totals.failed`` is left NULL in the rows already counted, which the
next listing counts again. The index and the column are written out here as version 10 made
them, and made only when they do not exist, so a step cut short runs again
(storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import Column, Integer, inspect

revision = "v10"
down_revision = "v9"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_exchanges_started_at ON exchanges (started_at, seq)"
    )
    if "failed" not in {c["name"] for c in inspect(conn).get_columns("cassette_totals")}:
        op.add_column("cassette_totals", Column("failed", Integer))
