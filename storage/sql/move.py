"""Moving a store's bodies into object storage, and back (``freezeframe blobs move``).

A body moves one row at a time, each in a transaction of its own, so a store that proxies
are recording into keeps working throughout and a move stopped half way leaves every body
readable (some here, some there) and can simply be run again.

Into object storage: the body is read back whole from its row (or part by part, for a streamed
one), checked against its name, uploaded, and only then its row emptied (storage.objects: an
object exists before a row names it). Bodies stored as deltas are moved deepest first, so the
base a delta is read against is still in the database when it is read.

Back into the database: the object is read, checked, and stored in its row compressed on its
own (deltas are a writer's saving, not worth recomputing here). The objects stay in the bucket:
being named by their content, they may be shared with other stores; ``gc --blobs`` on a store
that still uses the bucket keeps what it names, and a bucket no store uses can be emptied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlalchemy import Connection, Engine, delete, select, update

from freezeframe.storage import blobs
from freezeframe.storage.objects import BlobStore
from freezeframe.storage.sql import bodies
from freezeframe.storage.sql.rows import blob_row
from freezeframe.storage.sql.schema import blob_parts
from freezeframe.storage.sql.schema import blobs as blobs_table

_HERE = (
    select(blobs_table.c.digest)
    .where(blobs_table.c.data != b"")
    .order_by(blobs_table.c.depth.desc(), blobs_table.c.digest)
)
_STREAMED = select(blobs_table.c.digest).where(blobs_table.c.parts > 0)
_THERE = select(blobs_table.c.digest, blobs_table.c.size).where(
    blobs_table.c.data == b"", blobs_table.c.parts == 0, blobs_table.c.size > 0
)


def into_objects(
    engine: Engine, objects: BlobStore, progress: Callable[[str], None] | None = None
) -> int:
    """Move every body held in the database into ``objects``; how many moved."""
    with engine.connect() as conn:
        names = list(conn.scalars(_HERE)) + list(conn.scalars(_STREAMED))
    moved = 0
    for name in dict.fromkeys(names):
        with engine.begin() as conn:
            found = conn.execute(bodies.LAYOUT, {"digest": name}).first()
            if found is None or bodies.external(*found):
                continue
            size, parts, _, _ = found
            if parts:
                objects.put_parts(name, _checked_parts(conn, name, parts))
            else:
                objects.put(name, bodies.form(conn, name))
            conn.execute(
                update(blobs_table)
                .where(blobs_table.c.digest == name)
                .values(data=b"", parts=0, stored_size=0, base=None, depth=0)
            )
            conn.execute(delete(blob_parts).where(blob_parts.c.digest == name))
        moved += 1
        if progress is not None:
            progress(name)
    return moved


def into_database(
    engine: Engine, objects: BlobStore, progress: Callable[[str], None] | None = None
) -> int:
    """Move every body kept in ``objects`` back into the database; how many moved."""
    with engine.connect() as conn:
        names = list(conn.execute(_THERE).all())
    moved = 0
    for name, _size in names:
        cache = blobs.BlobCache(0, objects)
        data = bodies.fetched(name, cache)
        row = blob_row(name, data)
        with engine.begin() as conn:
            conn.execute(
                update(blobs_table)
                .where(blobs_table.c.digest == name, blobs_table.c.data == b"")
                .values(
                    data=row["data"], stored_size=row["stored_size"], parts=0, base=None, depth=0
                )
            )
        moved += 1
        if progress is not None:
            progress(name)
    return moved


def _checked_parts(conn: Connection, name: str, parts: int) -> Iterator[bytes]:
    """A streamed body's parts, decompressed, then Damaged if they are not the body named."""
    from blake3 import blake3

    hasher = blake3()
    for index in range(parts):
        data = bodies.part(conn, name, index)
        hasher.update(data)
        yield data
    if hasher.hexdigest() != name:
        raise bodies.Damaged(f"body {name[:16]} does not match its digest")
