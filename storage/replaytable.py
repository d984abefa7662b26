"""The recordings replay answers from memory, loaded a cassette at a time.

Replay looks a recording up by (cassette, key, occurrence) for every request it answers.
Asking the database each time costs a query, a decompression and the building of an
Exchange on the proxy's event loop; loading the cassette once, in one query, costs that
once. The table only ever says "here it is": a recording it does not hold (one recorded
after the load, by this proxy in ``auto`` mode or by a replica sharing the store, or one
left out because the table was full) is looked up in the store as before, so a lookup
table can make replay faster but never make it miss.

Recordings do not change once written, except by ``rekey``, ``rm`` or ``--fresh``; the
store drops a cassette's table when it does those itself, and the proxy drops every table
when replay starts from the top (``PUT /api/mode``, ``POST /api/replay/reset``), so work
done by another process is seen from then on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from freezeframe.storage.records import Exchange
from freezeframe.storage.sent import sent_digest

TABLE_BYTES = 64 * 1024 * 1024
"""What the bodies held in all tables may add up to; past it, lookups go to the store."""


def size_of(exchange: Exchange) -> int:
    """The bytes an exchange holds in memory: its bodies, canonical form and messages."""
    size = len(exchange.recorded.request_body) + len(exchange.recorded.canonical)
    if exchange.recorded.response is not None:
        size += len(exchange.recorded.response.body)
    for message in exchange.recorded.messages or ():
        size += len(message.data)
    return size


class ReplayTable:
    """Exchanges by (cassette, key, occurrence), up to ``capacity`` bytes of bodies.

    Thread-safe: the proxy's event loop reads it while the admin API's thread may drop it.
    A read is one dict lookup, without the lock.
    """

    def __init__(self, capacity: int = TABLE_BYTES) -> None:
        self._capacity = capacity
        self._size = 0
        self._entries: dict[tuple[str, str, int], Exchange] = {}
        self._sent: dict[tuple[str, bytes], str | None] = {}
        """The key of the recordings whose request was sent as these bytes (storage.sent),
        by cassette and digest; None when recordings under two keys share the digest."""
        self._loaded: set[str] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def loaded(self, cassette: str) -> bool:
        return cassette in self._loaded

    def get(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        return self._entries.get((cassette, key, occurrence))

    def key_sent(self, cassette: str, digest: bytes) -> str | None:
        """The key of the held recordings whose request was sent as the bytes of ``digest``."""
        return self._sent.get((cassette, digest))

    def fill(self, cassette: str, exchanges: Iterable[Exchange]) -> int:
        """Hold the cassette's ``exchanges`` while there is room; how many are held.

        ``exchanges`` is read whole (it is the store's query), even past the capacity,
        so that the load ends and its connection is given back.
        """
        held = 0
        with self._lock:
            for exchange in exchanges:
                size = size_of(exchange)
                if self._size + size > self._capacity:
                    continue
                slot = (cassette, exchange.recorded.key, exchange.recorded.slot.occurrence)
                if slot not in self._entries:
                    self._entries[slot] = exchange
                    self._size += size
                    held += 1
                    if exchange.recorded.request_body_ref is None:
                        self._index_sent(cassette, exchange)
            self._loaded.add(cassette)
        return held

    def drop(self, cassette: str | None = None) -> None:
        """Forget one cassette's recordings, or (None) every cassette's."""
        with self._lock:
            if cassette is None:
                self._entries = {}
                self._sent = {}
                self._size = 0
                self._loaded.clear()
                return
            kept = {slot: e for slot, e in self._entries.items() if slot[0] != cassette}
            self._size = sum(size_of(e) for e in kept.values())
            self._entries = kept
            self._sent = {found: key for found, key in self._sent.items() if found[0] != cassette}
            self._loaded.discard(cassette)

    def _index_sent(self, cassette: str, exchange: Exchange) -> None:
        digest = sent_digest(
            exchange.recorded.method,
            exchange.recorded.scheme,
            exchange.recorded.host,
            exchange.recorded.port,
            exchange.recorded.path,
            exchange.recorded.request_headers,
            exchange.recorded.request_body,
        )
        known = self._sent.setdefault((cassette, digest), exchange.recorded.key)
        if known != exchange.recorded.key:
            self._sent[(cassette, digest)] = None
