"""Bodies are stored once each, named by their blake3 digest and zstd-compressed.

Agents resend the same bodies over and over (tool schemas, system prompts, the
same answer replayed to several runs), so a body is addressed by its content:
the digest of its raw bytes is its name, and storing a body that is already
there is a no-op. The digest also lets ``verify`` detect a body changed in place.
"""

import threading
from collections import OrderedDict

import blake3
import zstandard

COMPRESSION_LEVEL = 3
"""zstd's default: most of the size win at a small fraction of the CPU of higher levels."""

CACHE_BYTES = 32 * 1024 * 1024


def digest(data: bytes) -> str:
    """The name of a body: the hex blake3 digest of its raw bytes."""
    return blake3.blake3(data).hexdigest()


def compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=COMPRESSION_LEVEL).compress(data)


def decompress(data: bytes) -> bytes:
    """Raises zstandard.ZstdError if ``data`` is not a zstd frame with its size recorded."""
    return zstandard.ZstdDecompressor().decompress(data)


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


class BlobCache:
    """The most recently read bodies, decompressed, up to a total size in bytes.

    Replay reads the same few bodies many times (every occurrence of a repeated
    request shares one), so keeping them spares a query and a decompression on
    the request path. Bodies larger than the whole budget are not kept.
    Thread-safe: the proxy and the admin app read from different threads.
    """

    def __init__(self, capacity: int = CACHE_BYTES) -> None:
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
