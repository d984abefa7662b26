"""Reading bodies back: whole when small, by reference and part by part when large.

A body is in one ``blobs`` row (``parts`` = 0, ``data`` one zstd frame) or, when it
was streamed in, in ``parts`` rows of ``blob_parts``. Callers get bodies up to
INLINE_LIMIT as bytes whichever way they are stored, and larger ones as a BlobRef
whose parts are read one statement each, so no read holds more than one part.
"""

from collections.abc import Iterator

import zstandard
from sqlalchemy import Connection, and_, bindparam, case, null, select

from storage import blobs
from storage.records import BlobRef
from storage.sql.schema import blob_parts
from storage.sql.schema import blobs as blobs_table

LAYOUT = select(blobs_table.c.size, blobs_table.c.parts, blobs_table.c.data).where(
    blobs_table.c.digest == bindparam("digest")
)
"""How a body is stored: its size, its number of parts, and its data when whole."""

_PART = select(blob_parts.c.data).where(
    blob_parts.c.digest == bindparam("digest"), blob_parts.c.idx == bindparam("idx")
)

_LOADED = and_(blobs_table.c.size <= blobs.INLINE_LIMIT, blobs_table.c.parts == 0)


class Damaged(Exception):
    """A stored body is missing, or cannot be read back as the body it names."""


def load(conn: Connection, names: set[str], cache: blobs.BlobCache) -> dict[str, bytes | BlobRef]:
    """Bodies by digest: from the cache, else read and cached when at most
    INLINE_LIMIT bytes, else as a BlobRef. Raises Damaged for a missing body."""
    found: dict[str, bytes | BlobRef] = {}
    for name in names:
        data = cache.get(name)
        if data is not None:
            found[name] = data
    wanted = names - set(found)
    if not wanted:
        return found
    query = select(
        blobs_table.c.digest,
        blobs_table.c.size,
        blobs_table.c.parts,
        case((_LOADED, blobs_table.c.data), else_=null()),
    ).where(blobs_table.c.digest.in_(wanted))
    for name, size, parts, stored in conn.execute(query):
        if size > blobs.INLINE_LIMIT:
            found[name] = BlobRef(name, size)
            continue
        if parts == 0:
            data = blobs.decompress(stored)
        else:
            data = b"".join(part(conn, name, index) for index in range(parts))
        cache.put(name, data)
        found[name] = data
    if missing := wanted - set(found):
        raise Damaged(f"body {min(missing)[:16]} is missing")
    return found


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


def problem(conn: Connection, name: str) -> str | None:
    """Why the body named ``name`` is not stored intact; None if it is. A streamed
    body is re-hashed part by part, never loaded whole."""
    found = conn.execute(LAYOUT, {"digest": name}).first()
    if found is None:
        return blobs.problem(name, None)
    _, parts, stored = found
    if parts == 0:
        return blobs.problem(name, stored)
    stored_parts = (conn.scalar(_PART, {"digest": name, "idx": index}) for index in range(parts))
    return blobs.parts_problem(name, stored_parts)
