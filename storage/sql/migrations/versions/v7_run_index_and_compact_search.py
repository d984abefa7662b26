"""6 -> 7: an index of runs, and the search index compressed and contentless.

The tables are as version 7 made them, frozen here (a revision never imports today's
schema, nor the code that fills the index, which later versions change); the step checks
what already exists, so one cut short runs again (storage.sql.versioning).
"""

from alembic import op
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)

revision = "v7"
down_revision = "v6"
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
_exchanges = Table(
    "exchanges",
    _metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Text),
    Index("ix_exchanges_run_id", "run_id"),
)
_texts = Table(
    "texts",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("digest", BigInteger, nullable=False, unique=True),
    Column("data", LargeBinary, nullable=False),
)
_text_uses = Table(
    "text_uses",
    _metadata,
    Column("text_id", ForeignKey("texts.id"), primary_key=True),
    Column("exchange_id", ForeignKey("exchanges.id"), primary_key=True),
    Column("part", String(16), primary_key=True),
    Index(None, "exchange_id"),
    sqlite_with_rowid=False,
)
_SQLITE_SEARCH = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS texts_fts USING fts5("
    "body, content='', columnsize=0, tokenize='unicode61')",
)
_POSTGRESQL_SEARCH = (
    "ALTER TABLE texts ADD COLUMN IF NOT EXISTS tsv tsvector NOT NULL",
    "CREATE INDEX IF NOT EXISTS ix_texts_tsv ON texts USING GIN (tsv)",
)


def upgrade() -> None:
    index_runs_and_compact_search(op.get_bind())


def index_runs_and_compact_search(conn: Connection) -> None:
    """6 -> 7: an index of exchanges by run id, and the search index, compressed and
    contentless, made empty and with no mark (``search_indexed``): the store's writer fills
    it from the stored exchanges when it starts, as it indexes what a killed process left
    (storage.sql.search.catch_up), so the index is the one the running code writes. The
    values of version 6 are in clear text under other ids, so they are dropped."""
    for index in _exchanges.indexes:
        index.create(conn, checkfirst=True)
    for name in ("texts_fts", "text_uses", "texts"):
        conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
    _texts.create(conn)
    _text_uses.create(conn)
    search = _SQLITE_SEARCH if conn.dialect.name == "sqlite" else _POSTGRESQL_SEARCH
    for statement in search:
        conn.exec_driver_sql(statement)
    conn.execute(text("DELETE FROM meta WHERE name = 'search_indexed'"))
