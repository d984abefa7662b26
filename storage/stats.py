"""What the store's writer has done since the store was opened: for metrics scrapes.

The writer thread counts as it commits, and a scrape copies the counts: neither waits on
the other for longer than an addition. Everything counts from the store's opening; a
metrics system turns the totals into rates.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class WriterStats:
    """Totals since the store was opened, and the queue's length now."""

    queued: int = 0
    """Exchanges, notes and bodies submitted and not yet taken by the writer."""
    batches: int = 0
    """Transactions that committed exchanges."""
    write_seconds: float = 0.0
    """Time those transactions took, compression and indexing for search excluded."""
    exchanges: int = 0
    """Exchanges committed."""
    bodies_stored: int = 0
    """Bodies (requests, answers, canonical forms, transcripts) new to the store."""
    body_bytes: int = 0
    """Their bytes as sent."""
    stored_bytes: int = 0
    """Their bytes as stored: compressed, or as a delta against an earlier body."""
    bodies_deduplicated: int = 0
    """Bodies that were already stored, so that only a reference was written."""
    deduplicated_bytes: int = 0
    """Their bytes as sent: what deduplication saved."""


class StatsCounter:
    """The writer's side: thread-safe additions to the totals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = WriterStats()

    def committed(
        self,
        seconds: float,
        exchanges: int,
        new: list[tuple[int, int]],
        known: list[int],
    ) -> None:
        """A batch of ``exchanges`` committed in ``seconds``; ``new`` holds the (sent, stored)
        sizes of the bodies it stored, ``known`` the sizes of those already stored."""
        with self._lock:
            s = self._stats
            self._stats = replace(
                s,
                batches=s.batches + 1,
                write_seconds=s.write_seconds + seconds,
                exchanges=s.exchanges + exchanges,
                bodies_stored=s.bodies_stored + len(new),
                body_bytes=s.body_bytes + sum(sent for sent, _ in new),
                stored_bytes=s.stored_bytes + sum(stored for _, stored in new),
                bodies_deduplicated=s.bodies_deduplicated + len(known),
                deduplicated_bytes=s.deduplicated_bytes + sum(known),
            )

    def snapshot(self, queued: int) -> WriterStats:
        with self._lock:
            return replace(self._stats, queued=queued)
