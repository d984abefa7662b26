"""Collecting what no cassette uses any more: bodies, canonical forms, transcripts, and
search values.

Removing a cassette takes its bodies with it (storage.sql.remove), but bodies are left
behind by an import that failed half way, by a body streamed in for an exchange that was
never written, and by stores written before schema 5. ``collect`` finds them by what the
exchanges name, keeps one another body is stored against (storage.deltas), and leaves
alone a body stored less than ``grace`` seconds ago: the
exchange that will name it may still be on its way (a large request body is stored when it
ends, its exchange when the answer ends), in this process or in another one sharing the
store.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, and_, exists, func, or_, select, text

from freezeframe.storage.records import Collected
from freezeframe.storage.sql.remove import IN_LIST, deletable, delete_blobs
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.sql.schema import exchanges, texts
from freezeframe.storage.sql.search import drop_values

_NAMED_BY = (
    exchanges.c.request_body_digest,
    exchanges.c.response_body_digest,
    exchanges.c.canonical_digest,
    exchanges.c.messages_digest,
)


def collect(conn: Connection, grace: float, *, dry_run: bool) -> Collected:
    """Delete (unless ``dry_run``) every body no exchange names, stored before the grace
    period, and every search value no exchange holds."""
    before = time.time() - grace
    unnamed = ~exists(
        select(1).where(or_(*(column == blobs_table.c.digest for column in _NAMED_BY)))
    )
    old = or_(blobs_table.c.stored_at.is_(None), blobs_table.c.stored_at < before)
    sizes = dict(
        conn.execute(
            select(blobs_table.c.digest, blobs_table.c.stored_size).where(and_(unnamed, old))
        ).all()
    )
    digests = deletable(conn, set(sizes))
    unused = conn.scalar(
        select(func.count())
        .select_from(texts)
        .where(texts.c.id.not_in(select(text("text_id FROM text_uses"))))
    )
    found = Collected(
        bodies=len(digests),
        freed=sum(int(sizes[digest]) for digest in digests),
        values=int(unused or 0),
    )
    if dry_run:
        return found
    for start in range(0, len(digests), IN_LIST):
        delete_blobs(conn, digests[start : start + IN_LIST])
    drop_values(conn, "id NOT IN (SELECT text_id FROM text_uses)")
    return found
