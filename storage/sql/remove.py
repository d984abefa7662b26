"""Removing a cassette, and with it the bodies that no other cassette uses.

Bodies are shared by digest across cassettes (a system prompt, a tool schema, a canonical
form), so a body goes only when no exchange left in the store names it. Everything happens
in one transaction: the cassette is there, whole, or it is gone with its orphaned bodies.
"""

from collections.abc import Iterable, Iterator

from sqlalchemy import Connection, delete, func, select

from freezeframe.storage.errors import CassetteNotFound
from freezeframe.storage.records import Removed
from freezeframe.storage.sql.schema import (
    blob_parts,
    cassettes,
    drifts,
    exchanges,
    misses,
    notes,
)
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.sql.search import forget_exchanges

_BODY_COLUMNS = (
    exchanges.c.request_body_digest,
    exchanges.c.response_body_digest,
    exchanges.c.canonical_digest,
    exchanges.c.messages_digest,
)

IN_LIST = 500
"""Digests per IN (...) list: far below SQLite's limit on bound parameters."""


def remove_cassette(conn: Connection, cassette: str, where: str) -> Removed:
    """Delete the cassette, its exchanges, drift notes, misses and search entries, and the
    bodies only it used."""
    cassette_id = conn.scalar(select(cassettes.c.id).where(cassettes.c.name == cassette))
    if cassette_id is None:
        raise CassetteNotFound(cassette, where)
    used: set[str] = set()
    for column in _BODY_COLUMNS:
        found = select(column).where(exchanges.c.cassette_id == cassette_id, column.is_not(None))
        used.update(conn.scalars(found.distinct()))
    ids = list(conn.scalars(select(exchanges.c.id).where(exchanges.c.cassette_id == cassette_id)))
    forget_exchanges(conn, ids)
    conn.execute(delete(drifts).where(drifts.c.cassette_id == cassette_id))
    conn.execute(delete(misses).where(misses.c.cassette == cassette))
    conn.execute(delete(notes).where(notes.c.cassette == cassette))
    conn.execute(delete(exchanges).where(exchanges.c.cassette_id == cassette_id))
    conn.execute(delete(cassettes).where(cassettes.c.id == cassette_id))
    orphans = deletable(conn, used - set(_still_used(conn, used)))
    freed = 0
    for batch in _batches(orphans):
        size = select(func.sum(blobs_table.c.stored_size)).where(blobs_table.c.digest.in_(batch))
        freed += int(conn.scalar(size) or 0)
        delete_blobs(conn, batch)
    return Removed(cassette=cassette, exchanges=len(ids), bodies=len(orphans), freed=freed)


def deletable(conn: Connection, candidates: set[str]) -> list[str]:
    """Those of ``candidates`` that no body staying behind is stored against, directly or
    through other bases (storage.deltas), in an order they can be deleted in: a body
    before its base."""
    doomed = set(candidates)
    while True:
        needed = {
            base
            for batch in _batches(sorted(doomed))
            for digest, base in conn.execute(
                select(blobs_table.c.digest, blobs_table.c.base).where(
                    blobs_table.c.base.in_(batch)
                )
            )
            if digest not in doomed
        }
        if not needed:
            break
        doomed -= needed
    depths: dict[str, int] = {}
    for batch in _batches(sorted(doomed)):
        query = select(blobs_table.c.digest, blobs_table.c.depth).where(
            blobs_table.c.digest.in_(batch)
        )
        depths.update((digest, depth or 0) for digest, depth in conn.execute(query))
    return sorted(doomed, key=lambda digest: (-depths.get(digest, 0), digest))


def delete_blobs(conn: Connection, digests: list[str]) -> None:
    conn.execute(delete(blob_parts).where(blob_parts.c.digest.in_(digests)))
    conn.execute(delete(blobs_table).where(blobs_table.c.digest.in_(digests)))


def _still_used(conn: Connection, digests: Iterable[str]) -> Iterator[str]:
    """Those of ``digests`` that some exchange (of any cassette) still names."""
    for batch in _batches(sorted(digests)):
        for column in _BODY_COLUMNS:
            yield from conn.scalars(select(column).where(column.in_(batch)).distinct())


def _batches(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), IN_LIST):
        yield items[start : start + IN_LIST]
