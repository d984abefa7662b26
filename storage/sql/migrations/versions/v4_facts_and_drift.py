"""3 -> 4: facts, run ids, stripped digests, transcripts and drift.

The tables and columns are as version 4 made them, frozen here (a revision never imports
today's schema, which later versions change); the step checks what already exists, so one
cut short runs again (storage.sql.versioning).
"""

import json

from alembic import op
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.schema import CreateColumn

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None

_FACTS = {
    "provider": Text,
    "api": Text,
    "model": Text,
    "answered_model": Text,
    "temperature": Double,
    "top_p": Double,
    "seed": BigInteger,
    "max_tokens": BigInteger,
    "stream": Boolean,
    "system_fingerprint": Text,
    "response_id": Text,
    "request_id": Text,
    "usage": Text,
    "finish_reason": Text,
    "rate_limits": Text,
    "trace_id": Text,
    "parent_span_id": Text,
}
"""The fact columns of version 4, each typed by its fact's kind."""

_metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
Table("cassettes", _metadata, Column("id", Integer, primary_key=True))
_exchanges = Table(
    "exchanges",
    _metadata,
    Column("id", Integer, primary_key=True),
    Column("context", Text, nullable=False),
    Column("message_count", Integer),
    Column("run_id", Text),
    Column("stripped", Text),
    *(Column(name, kind) for name, kind in _FACTS.items()),
)
_drifts = Table(
    "drifts",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette_id", ForeignKey("cassettes.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("at", Double, nullable=False),
    Column("paths", Text, nullable=False),
    Column("context", Text, nullable=False),
    Index(None, "cassette_id", "seq"),
)
_DERIVED = ("message_count", "run_id", "stripped", *_FACTS)
_ESCAPED = "\uffff"


def _exact_text(value: str) -> str:
    """``value`` as version 4 stores text that a column may refuse (a lone surrogate, NUL,
    or text that starts with the marker): a JSON string literal behind U+FFFF."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _ESCAPED + json.dumps(value, ensure_ascii=True)
    if "\x00" in value or value.startswith(_ESCAPED):
        return _ESCAPED + json.dumps(value, ensure_ascii=True)
    return value


def upgrade() -> None:
    add_facts_and_drift(op.get_bind())


def add_facts_and_drift(conn: Connection) -> None:
    """3 -> 4: facts, run ids, stripped digests, transcripts and drift. Existing rows get
    their run id from their context, so that filtering by run finds them; the other new
    columns stay NULL, since what they hold was not kept (or, for facts, is worked out
    from the raw bytes by code the store does not have)."""
    present = {c["name"] for c in inspect(conn).get_columns("exchanges")}
    for name in ("messages_digest", *_DERIVED):
        if name in present:
            continue
        if name == "messages_digest":
            # Spelled out: SQLite adds a foreign key to a table only inline, with the column.
            definition = (
                f"{name} VARCHAR(64) CONSTRAINT fk_exchanges_{name} REFERENCES blobs (digest)"
            )
        else:
            definition = str(CreateColumn(_exchanges.c[name]).compile(dialect=conn.dialect))
        conn.execute(text(f"ALTER TABLE exchanges ADD COLUMN {definition}"))
    _drifts.create(conn, checkfirst=True)
    # Context is ASCII JSON, so a run id's key is always spelled this way in it.
    with_run = select(_exchanges.c.id, _exchanges.c.context).where(
        _exchanges.c.run_id.is_(None), _exchanges.c.context.contains('"run-id"')
    )
    runs = [
        {"row_id": row_id, "run": _exact_text(run)}
        for row_id, context in conn.execute(with_run)
        if isinstance(run := json.loads(context).get("run-id"), str)
    ]
    if runs:
        conn.execute(
            update(_exchanges)
            .where(_exchanges.c.id == bindparam("row_id"))
            .values(run_id=bindparam("run")),
            runs,
        )
