"""Slot and recording counters kept in memory, so the request path never waits on I/O.

A cassette's counters are loaded from the database the first time it is touched; from
then on they propose each request's slot. The database decides (storage.sql.writer): when
another process has taken a slot, the exchange is stored in the next free one and the
counters move past it (moved). The counters also remember which submitted exchanges the
writer thread has not yet written, which lets readers tell "not recorded" from "not
written yet".
"""

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from freezeframe.storage.records import NewExchange, Slot


@dataclass
class CassetteCounts:
    """What one cassette holds: the next free seq, and per key the next free
    occurrence and the number of recordings."""

    next_seq: int = 0
    next_occurrence: dict[str, int] = field(default_factory=dict)
    recorded: dict[str, int] = field(default_factory=dict)


class Counters:
    """Thread-safe counters for the cassettes one store has touched."""

    def __init__(self, load: Callable[[str], CassetteCounts]) -> None:
        self._load = load
        self._cassettes: dict[str, CassetteCounts] = {}
        self._pending: dict[str, Counter[tuple[str, int]]] = {}
        self._lock = threading.Lock()

    def reserve(self, cassette: str, key: str) -> Slot:
        with self._lock:
            counts = self._counts(cassette)
            slot = Slot(seq=counts.next_seq, occurrence=counts.next_occurrence.get(key, 0))
            counts.next_seq += 1
            counts.next_occurrence[key] = slot.occurrence + 1
            return slot

    def count(self, cassette: str, key: str) -> int:
        with self._lock:
            return self._counts(cassette).recorded.get(key, 0)

    def submitted(self, exchange: NewExchange) -> None:
        """Count a submitted exchange as recorded and pending.

        A slot that did not come from reserve() (an import, say) still moves the
        counters past it, so a later reserve() cannot hand out the same position.
        """
        cassette, key, slot = exchange.cassette, exchange.key, exchange.slot
        with self._lock:
            counts = self._counts(cassette)
            counts.recorded[key] = counts.recorded.get(key, 0) + 1
            counts.next_seq = max(counts.next_seq, slot.seq + 1)
            counts.next_occurrence[key] = max(
                counts.next_occurrence.get(key, 0), slot.occurrence + 1
            )
            self._pending.setdefault(cassette, Counter())[key, slot.occurrence] += 1

    def written(self, exchange: NewExchange, ok: bool) -> None:
        """The writer is done with an exchange; if it could not be stored, uncount it."""
        cassette, key = exchange.cassette, exchange.key
        with self._lock:
            pending = self._pending[cassette]
            pending[key, exchange.slot.occurrence] -= 1
            if pending[key, exchange.slot.occurrence] == 0:
                del pending[key, exchange.slot.occurrence]
            if not pending:
                del self._pending[cassette]
            counts = self._cassettes.get(cassette)
            if not ok and counts is not None:
                counts.recorded[key] -= 1

    def moved(self, exchange: NewExchange, stored: Slot) -> None:
        """The writer stored ``exchange`` at ``stored``, not at its slot: another process
        records into the cassette too. Later slots are proposed after it."""
        with self._lock:
            counts = self._cassettes.get(exchange.cassette)
            if counts is None:
                return
            counts.next_seq = max(counts.next_seq, stored.seq + 1)
            counts.next_occurrence[exchange.key] = max(
                counts.next_occurrence.get(exchange.key, 0), stored.occurrence + 1
            )

    def forget(self, cassette: str) -> None:
        """Drop a cassette's counters, to be loaded again when next touched: its keys or
        occurrences were rewritten in the database (rekey)."""
        with self._lock:
            self._cassettes.pop(cassette, None)

    def is_pending(self, cassette: str, key: str, occurrence: int) -> bool:
        with self._lock:
            return (key, occurrence) in self._pending.get(cassette, {})

    def has_pending(self, cassette: str) -> bool:
        with self._lock:
            return cassette in self._pending

    def _counts(self, cassette: str) -> CassetteCounts:
        counts = self._cassettes.get(cassette)
        if counts is None:
            counts = self._cassettes[cassette] = self._load(cassette)
        return counts
