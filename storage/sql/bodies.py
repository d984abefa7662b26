"""Reading bodies back: whole when small, by reference and part by part when large.

A body is in one ``blobs`` row (``parts`` = 0, ``data`` one zstd frame, compressed on its
own or against a ``base``: storage.deltas) or, when it was streamed in, in ``parts`` rows of
``blob_parts``. Callers get bodies up to INLINE_LIMIT as bytes whichever way they are
stored, and larger ones as a BlobRef whose parts are read one statement each, so no read
holds more than one part. A body stored against a base is read after its base, from the
cache when it is there; the chain is at most MAX_DEPTH long, or the body is damaged.

A body kept in object storage (``--blobs``, storage.objects) has a row with its size and no
data (``external``): it is read from the cache, else from the object store the cache reads
through (BlobCache.objects), and checked against its name before it is kept.
"""

from collections.abc import Iterator
from typing import TYPE_CHECKING

import zstandard
from sqlalchemy import Connection, and_, bindparam, case, null, select

from freezeframe.storage import blobs
from freezeframe.storage.records import BlobRef
from freezeframe.storage.sql.schema import blob_parts
from freezeframe.storage.sql.schema import blobs as blobs_table

if TYPE_CHECKING:
    from freezeframe.storage.objects import BlobStore

LAYOUT = select(
    blobs_table.c.size, blobs_table.c.parts, blobs_table.c.data, blobs_table.c.base
).where(blobs_table.c.digest == bindparam("digest"))
"""How a body is stored: its size, its number of parts, its data when whole, and its base."""

_BASE = select(blobs_table.c.parts, blobs_table.c.data, blobs_table.c.base).where(
    blobs_table.c.digest == bindparam("digest")
)

_PART = select(blob_parts.c.data).where(
    blob_parts.c.digest == bindparam("digest"), blob_parts.c.idx == bindparam("idx")
)

_LOADED = and_(blobs_table.c.size <= blobs.INLINE_LIMIT, blobs_table.c.parts == 0)


class Damaged(Exception):
    """A stored body is missing, or cannot be read back as the body it names."""


def external(size: int | None, parts: int | None, stored: bytes | None, base: str | None) -> bool:
    """Whether a blobs row names a body kept in object storage: a size, no parts, no base,
    and empty data (a body kept here is at least one zstd frame, never empty)."""
    return bool(size) and not parts and base is None and stored is not None and not stored


def fetched(name: str, cache: blobs.BlobCache) -> bytes:
    """A body from the object store the cache reads through, checked and cached. Raises
    Damaged when it is missing or not the body it names, StoreError when the object store
    cannot be reached (or this store was opened without --blobs)."""
    from freezeframe.storage.errors import StoreError
    from freezeframe.storage.objects import BlobMissing

    objects = cache.objects
    if objects is None:
        raise StoreError(
            f"body {name[:16]} is kept in object storage: open the store with --blobs URL "
            "(FREEZEFRAME_BLOBS)"
        )
    try:
        data = objects.get(name)
    except BlobMissing as exc:
        raise Damaged(str(exc)) from None
    if blobs.digest(data) != name:
        raise Damaged(f"body {name[:16]} in {objects.location} does not match its digest")
    cache.put(name, data)
    return data


def fetched_range(name: str, cache: blobs.BlobCache, start: int, end: int) -> bytes:
    """Bytes ``start`` to ``end`` of a body in object storage (checked as a whole by the
    reader that reads them all: SqlStore.read_blob)."""
    from freezeframe.storage.errors import StoreError
    from freezeframe.storage.objects import BlobMissing

    if cache.objects is None:
        raise StoreError(
            f"body {name[:16]} is kept in object storage: open the store with --blobs URL "
            "(FREEZEFRAME_BLOBS)"
        )
    try:
        return cache.objects.get_range(name, start, end)
    except BlobMissing as exc:
        raise Damaged(str(exc)) from None


def load(
    conn: Connection, names: set[str], cache: blobs.BlobCache, *, whole: bool = False
) -> dict[str, bytes | BlobRef]:
    """Bodies by digest: from the cache, else read and cached when at most
    INLINE_LIMIT bytes (or ``whole``: whatever their size), else as a BlobRef.
    Raises Damaged for a missing body or one that cannot be decompressed."""
    limit = None if whole else blobs.INLINE_LIMIT
    found: dict[str, bytes | BlobRef] = {}
    for name in names:
        data = cache.get(name)
        if data is not None:
            found[name] = data
    wanted = names - set(found)
    if not wanted:
        return found
    data_column = blobs_table.c.data if whole else case((_LOADED, blobs_table.c.data), else_=null())
    query = select(
        blobs_table.c.digest,
        blobs_table.c.size,
        blobs_table.c.parts,
        data_column,
        blobs_table.c.base,
    ).where(blobs_table.c.digest.in_(wanted))
    for name, size, parts, stored, base in conn.execute(query).all():
        body = resolve(name, size, parts, stored, cache, limit, base)
        if body is None and base is not None and stored is not None:
            body = unchain(conn, name, stored, base, cache)
        elif body is None:
            body = b"".join(part(conn, name, index) for index in range(parts))
            cache.put(name, body)
        found[name] = body
    if missing := wanted - set(found):
        raise Damaged(f"body {min(missing)[:16]} is missing")
    return found


def resolve(
    name: str,
    size: int | None,
    parts: int | None,
    stored: bytes | None,
    cache: blobs.BlobCache,
    limit: int | None = blobs.INLINE_LIMIT,
    base: str | None = None,
) -> bytes | BlobRef | None:
    """A body from what a query found of its blob row (all None: no row): cached, or
    decompressed and cached from ``stored``, or a BlobRef when larger than ``limit``.
    None when it must be read in parts, ``stored`` was not fetched, or its ``base`` is not
    in the cache: load() it. Raises Damaged for a missing body or one that cannot be
    decompressed."""
    if limit is not None and size is not None and size > limit:
        return BlobRef(name, size)
    data = cache.get(name)
    if data is not None:
        return data
    if size is None:
        raise Damaged(f"body {name[:16]} is missing")
    if external(size, parts, stored, base):
        return fetched(name, cache)
    if parts or stored is None:
        return None
    if base is None:
        data = _decompressed(name, stored)
    else:
        based_on = cache.get(base)
        if based_on is None:
            return None
        data = _against(name, stored, based_on)
    cache.put(name, data)
    return data


def unchain(
    conn: Connection, name: str, stored: bytes, base: str, cache: blobs.BlobCache | None
) -> bytes:
    """A body stored against ``base``: its chain of bases is read back to one in the
    ``cache`` (None: read everything from the database) or stored on its own, and each is
    decompressed against the one before. Raises Damaged for a missing or damaged base, or
    a chain longer than MAX_DEPTH (a cycle, in a store edited by hand)."""
    pending = [(name, stored)]
    data = None if cache is None else cache.get(base)
    while data is None:
        if len(pending) > blobs.MAX_DEPTH:
            raise Damaged(f"body {name[:16]} needs more than {blobs.MAX_DEPTH} bases")
        found = conn.execute(_BASE, {"digest": base}).first()
        if found is None or found[0]:
            raise Damaged(f"body {pending[-1][0][:16]} is stored against {base[:16]}, not there")
        _, stored_base, next_base = found
        if next_base is None:
            data = _decompressed(base, stored_base)
        else:
            pending.append((base, stored_base))
            base = next_base
            data = None if cache is None else cache.get(base)
    for pending_name, pending_stored in reversed(pending):
        data = _against(pending_name, pending_stored, data)
        if cache is not None:
            cache.put(pending_name, data)
    return data


def _decompressed(name: str, stored: bytes) -> bytes:
    try:
        return blobs.decompress(stored)
    except zstandard.ZstdError:
        raise Damaged(f"body {name[:16]} cannot be decompressed") from None


def _against(name: str, stored: bytes, base: bytes) -> bytes:
    try:
        return blobs.decompress_against(stored, base)
    except zstandard.ZstdError:
        raise Damaged(f"body {name[:16]} cannot be decompressed against its base") from None


def part(conn: Connection, name: str, index: int) -> bytes:
    """One part of a streamed body, decompressed. Raises Damaged."""
    stored = conn.scalar(_PART, {"digest": name, "idx": index})
    if stored is None:
        raise Damaged(f"body {name[:16]} part {index} is missing")
    try:
        return blobs.decompress_part(stored)
    except zstandard.ZstdError:
        raise Damaged(f"body {name[:16]} part {index} cannot be decompressed") from None


def whole(name: str, stored: bytes) -> Iterator[bytes]:
    """A body stored whole, decompressed in pieces of at most PART_SIZE. Raises Damaged."""
    reader = zstandard.ZstdDecompressor().read_to_iter(stored, write_size=blobs.PART_SIZE)
    try:
        yield from reader
    except zstandard.ZstdError:
        raise Damaged(f"body {name[:16]} cannot be decompressed") from None


def form(conn: Connection, name: str, objects: "BlobStore | None" = None) -> bytes:
    """A blob read whole from the database, never the cache, and checked against its
    name: how verify reads a canonical form. Raises Damaged."""
    found = conn.execute(LAYOUT, {"digest": name}).first()
    if found is None:
        raise Damaged(blobs.problem(name, None))
    size, parts, stored, base = found
    if external(size, parts, stored, base):
        return fetched(name, blobs.BlobCache(0, objects))
    if base is not None and not parts:
        data = unchain(conn, name, stored, base, None)
        if blobs.digest(data) != name:
            raise Damaged(f"body {name[:16]} does not match its digest")
        return data
    if parts:
        stored_parts = [conn.scalar(_PART, {"digest": name, "idx": i}) for i in range(parts)]
        if reason := blobs.parts_problem(name, stored_parts):
            raise Damaged(reason)
        return b"".join(blobs.decompress_part(part) for part in stored_parts if part)
    try:
        data = blobs.decompress(stored)
    except zstandard.ZstdError:
        raise Damaged(f"body {name[:16]} cannot be decompressed") from None
    if blobs.digest(data) != name:
        raise Damaged(f"body {name[:16]} does not match its digest")
    return data


def problem(conn: Connection, name: str, objects: "BlobStore | None" = None) -> str | None:
    """Why the body named ``name`` is not stored intact; None if it is. A streamed
    body is re-hashed part by part, never loaded whole; one in object storage is read
    back from it (``objects``) and hashed."""
    found = conn.execute(LAYOUT, {"digest": name}).first()
    if found is None:
        return blobs.problem(name, None)
    size, parts, stored, base = found
    if external(size, parts, stored, base):
        try:
            fetched(name, blobs.BlobCache(0, objects))
        except Damaged as exc:
            return str(exc)
        return None
    if parts == 0 and base is not None:
        try:
            form(conn, name)
        except Damaged as exc:
            return str(exc)
        return None
    if parts == 0:
        return blobs.problem(name, stored)
    stored_parts = (conn.scalar(_PART, {"digest": name, "idx": index}) for index in range(parts))
    return blobs.parts_problem(name, stored_parts)
