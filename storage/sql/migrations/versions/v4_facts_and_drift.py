"""3 -> 4: facts, run ids, stripped digests, transcripts and drift.

See storage.sql.schema for what version 4 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

import json

from alembic import op
from sqlalchemy import Connection, bindparam, inspect, select, text, update
from sqlalchemy.schema import CreateColumn

from freezeframe.storage.sql.schema import DERIVED, blobs, drifts, exchanges

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_facts_and_drift(op.get_bind())


def add_facts_and_drift(conn: Connection) -> None:
    """3 -> 4: facts, run ids, stripped digests, transcripts and drift. Existing rows get
    their run id from their context, so that filtering by run finds them; the other new
    columns stay NULL, since what they hold was not kept (or, for facts, is worked out
    from the raw bytes by code the store does not have)."""
    present = {c["name"] for c in inspect(conn).get_columns(exchanges.name)}
    for name in ("messages_digest", *DERIVED):
        if name in present:
            continue
        if name == "messages_digest":
            # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
            definition = (
                f"{name} VARCHAR(64) CONSTRAINT fk_{exchanges.name}_{name} "
                f"REFERENCES {blobs.name} (digest)"
            )
        else:
            definition = str(CreateColumn(exchanges.c[name]).compile(dialect=conn.dialect))
        conn.execute(text(f"ALTER TABLE {exchanges.name} ADD COLUMN {definition}"))
    drifts.create(conn, checkfirst=True)
    # Context is ASCII JSON, so a run id's key is always spelled this way in it.
    with_run = select(exchanges.c.id, exchanges.c.context).where(
        exchanges.c.run_id.is_(None), exchanges.c.context.contains('"run-id"')
    )
    runs = [
        {"row_id": row_id, "run": run}
        for row_id, context in conn.execute(with_run)
        if isinstance(run := json.loads(context).get("run-id"), str)
    ]
    if runs:
        conn.execute(
            update(exchanges)
            .where(exchanges.c.id == bindparam("row_id"))
            .values(run_id=bindparam("run")),
            runs,
        )
