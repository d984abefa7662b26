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

With bodies in object storage (--blobs), the objects go too: those whose rows were collected,
and any other object no row names (uploaded for an exchange that was never written), once
older than ``grace``. A writer uploads an object before the row that names it commits, so
``collect`` could delete an object between a writer's upload and its commit; each collection
therefore moves the store's GC_GENERATION on, in its transaction, and a writer that finds it
moved since it last looked uploads its batch's bodies again inside its own transaction, which
waits for the collection's to end (storage.sql.writer).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Integer, Text, and_, exists, func, or_, select, text, update

from freezeframe.storage.records import Collected
from freezeframe.storage.sql.engine import insert_ignore
from freezeframe.storage.sql.remove import IN_LIST, deletable, delete_blobs
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.sql.schema import exchanges, meta, texts
from freezeframe.storage.sql.search import drop_values

if TYPE_CHECKING:
    from freezeframe.storage.objects import BlobStore

GC_GENERATION = "blobs_gc_generation"
"""The meta row a collection moves on: see the module's docstring."""

LIST_PAGE = 1000
"""Objects listed, then looked up in the blobs table, at a time."""

_NAMED_BY = (
    exchanges.c.request_body_digest,
    exchanges.c.response_body_digest,
    exchanges.c.canonical_digest,
    exchanges.c.messages_digest,
)


def collect(
    conn: Connection, grace: float, *, dry_run: bool, objects: BlobStore | None = None
) -> Collected:
    """Delete (unless ``dry_run``) every body no exchange names, stored before the grace
    period, and every search value no exchange holds; with ``objects``, every object there
    no body row names, older than the grace period too."""
    before = time.time() - grace
    if objects is not None and not dry_run:
        _move_generation(conn)
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
        if objects is not None:
            kept = set(digests)
            stray = _unnamed_objects(conn, objects, before)
            return Collected(
                found.bodies, found.freed, found.values, len([n for n in stray if n not in kept])
            )
        return found
    for start in range(0, len(digests), IN_LIST):
        delete_blobs(conn, digests[start : start + IN_LIST])
    drop_values(conn, "id NOT IN (SELECT text_id FROM text_uses)")
    if objects is None:
        return found
    stray = _unnamed_objects(conn, objects, before)
    for name in stray:
        objects.delete(name)
    return Collected(found.bodies, found.freed, found.values, len(stray))


def _move_generation(conn: Connection) -> None:
    """Move GC_GENERATION on, holding its row until the collection commits. On PostgreSQL the
    row is made first in a transaction of its own, committed: a writer reading a row that
    another transaction is inserting does not wait for it, and must."""
    if conn.dialect.name == "postgresql":
        with conn.engine.begin() as apart:
            apart.execute(insert_ignore(conn.engine, meta).values(name=GC_GENERATION, value="0"))
    moved = conn.execute(
        update(meta)
        .where(meta.c.name == GC_GENERATION)
        .values(value=func.cast(func.cast(meta.c.value, Integer) + 1, Text))
    )
    if moved.rowcount == 0:
        conn.execute(meta.insert().values(name=GC_GENERATION, value="1"))


def _unnamed_objects(conn: Connection, objects: BlobStore, before: float) -> list[str]:
    """The objects written before ``before`` that no body row names, a page of the bucket's
    listing at a time."""
    found: list[str] = []
    page: list[tuple[str, float]] = []

    def settle() -> None:
        names = [name for name, at in page if at < before]
        if names:
            named = set(
                conn.scalars(select(blobs_table.c.digest).where(blobs_table.c.digest.in_(names)))
            )
            found.extend(name for name in names if name not in named)
        page.clear()

    for item in objects.list():
        page.append(item)
        if len(page) == LIST_PAGE:
            settle()
    settle()
    return found
