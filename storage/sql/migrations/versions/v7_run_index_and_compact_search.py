"""6 -> 7: an index of runs, and the search index compressed and contentless.

See storage.sql.schema for what version 7 holds; the step checks what already exists, so
one cut short runs again (storage.sql.migrations).
"""

from alembic import op
from sqlalchemy import Connection, text

from freezeframe.storage.sql.schema import create_search, exchanges, text_uses, texts
from freezeframe.storage.sql.search import rebuild

revision = "v7"
down_revision = "v6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    index_runs_and_compact_search(op.get_bind())


def index_runs_and_compact_search(conn: Connection) -> None:
    """6 -> 7: an index of exchanges by run id, and the search index, compressed and
    contentless. The search index is built again from the stored exchanges
    (storage.sql.search.rebuild): the values of version 6 are in clear text under other ids,
    and an index rebuilt by today's code is the index today's code writes. Takes about as
    long as reading every stored body once."""
    for index in exchanges.indexes:
        index.create(conn, checkfirst=True)
    for name in ("texts_fts", "text_uses", "texts"):
        conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
    texts.create(conn)
    text_uses.create(conn)
    create_search(conn)
    rebuild(conn)
