"""Bodies are stored once each, named by their blake3 digest and zstd-compressed.

Agents resend the same bodies over and over (tool schemas, system prompts, the
same answer replayed to several runs), so a body is addressed by its content:
the digest of its raw bytes is its name, and storing a body that is already
there is a no-op. The digest also lets ``verify`` detect a body changed in place.

A body may be stored as a *delta*: compressed with another stored body, its *base*, as
zstd's dictionary, so that what the base already holds costs a few bytes (storage.deltas
chooses bases: an agent's requests repeat its whole conversation so far). Reading it back
means reading its base first, and its base's base: the chain is at most MAX_DEPTH long.

A body written as a stream (see storage.spool) is compressed in independent
frames of PART_SIZE input bytes each, its *parts*, so that it can be written and
read back one part at a time, never whole. A body of one part is stored like any
other: its one frame is an ordinary compressed body.
"""

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import blake3
import zstandard

if TYPE_CHECKING:
    from freezeframe.storage.objects import BlobStore

COMPRESSION_LEVEL = 3
"""zstd's default: most of the size win at a small fraction of the CPU of higher levels."""

CACHE_BYTES = 32 * 1024 * 1024

MAX_DEPTH = 16
"""The longest chain of bases a body may need to be read: a writer stores a body whole
rather than deeper, and a reader refuses a longer chain as damaged (or a cycle)."""

PART_SIZE = 1024 * 1024
"""Raw bytes per part of a streamed body: what a blob writer or reader holds at once."""

INLINE_LIMIT = 16 * 1024 * 1024
"""Bodies up to this size are read back whole as bytes; larger ones as a BlobRef."""


def digest(data: bytes) -> str:
    """The name of a body: the hex blake3 digest of its raw bytes."""
    return blake3.blake3(data).hexdigest()


class _Codecs(threading.local):
    """One compressor and one decompressor per thread, made once: making them costs
    more than compressing a small body, and neither may be shared between threads."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
        self.decompressor = zstandard.ZstdDecompressor()


_codecs = _Codecs()


def compress(data: bytes) -> bytes:
    return _codecs.compressor.compress(data)


def decompress(data: bytes) -> bytes:
    """Raises zstandard.ZstdError if ``data`` is not a zstd frame with its size recorded."""
    return _codecs.decompressor.decompress(data)


def compress_against(data: bytes, base: bytes) -> bytes:
    """``data`` compressed with the raw bytes of ``base`` as its dictionary."""
    return zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, dict_data=_raw(base)).compress(data)


def decompress_against(stored: bytes, base: bytes) -> bytes:
    """Raises zstandard.ZstdError if ``stored`` is not a frame compressed against ``base``."""
    return zstandard.ZstdDecompressor(dict_data=_raw(base)).decompress(stored)


def _raw(base: bytes) -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def compress_part(data: bytes | bytearray) -> bytes:
    """One part of a streamed body as an independent frame, with its size and a checksum
    recorded, so that each part can be checked and decompressed on its own."""
    return zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, write_checksum=True).compress(data)


def decompress_part(stored: bytes) -> bytes:
    """Raises zstandard.ZstdError unless ``stored`` is one intact frame of at most
    PART_SIZE bytes: the size is checked first, so a damaged header cannot make the
    reader allocate more than a part."""
    size = zstandard.frame_content_size(stored)
    if not 0 <= size <= PART_SIZE:
        raise zstandard.ZstdError(f"a part records {size} bytes, not 0 to {PART_SIZE}")
    return zstandard.ZstdDecompressor().decompress(stored)


def problem(name: str, stored: bytes | None) -> str | None:
    """Why ``stored`` is not the compressed body whose digest is ``name``; None if it is."""
    if stored is None:
        return f"body {name[:16]} is missing"
    try:
        data = decompress(stored)
    except zstandard.ZstdError:
        return f"body {name[:16]} cannot be decompressed"
    if digest(data) != name:
        return f"body {name[:16]} does not match its digest"
    return None


def parts_problem(name: str, parts: Iterable[bytes | None]) -> str | None:
    """Why the stored ``parts`` (None for a missing one) are not the body named ``name``;
    None if they are. Hashes part by part, never holding the whole body."""
    hasher = blake3.blake3()
    for index, stored in enumerate(parts):
        if stored is None:
            return f"body {name[:16]} part {index} is missing"
        try:
            hasher.update(decompress_part(stored))
        except zstandard.ZstdError:
            return f"body {name[:16]} part {index} cannot be decompressed"
    if hasher.hexdigest() != name:
        return f"body {name[:16]} does not match its digest"
    return None


class BlobCache:
    """The most recently read bodies, decompressed, up to a total size in bytes.

    Replay reads the same few bodies many times (every occurrence of a repeated
    request shares one), so keeping them spares a query and a decompression on
    the request path. Bodies larger than the whole budget are not kept.
    Thread-safe: the proxy and the admin app read from different threads.
    """

    def __init__(self, capacity: int = CACHE_BYTES, objects: "BlobStore | None" = None) -> None:
        self.objects = objects
        """The object store bodies kept there are read from (--blobs); None: none."""
        self._capacity = capacity
        self._size = 0
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> bytes | None:
        with self._lock:
            data = self._entries.get(digest)
            if data is not None:
                self._entries.move_to_end(digest)
            return data

    def put(self, digest: str, data: bytes) -> None:
        if len(data) > self._capacity:
            return
        with self._lock:
            if digest in self._entries:
                self._entries.move_to_end(digest)
                return
            self._entries[digest] = data
            self._size += len(data)
            while self._size > self._capacity:
                _, evicted = self._entries.popitem(last=False)
                self._size -= len(evicted)
