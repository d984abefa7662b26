"""A strict tape: what a replay left unasked, and what it was asked out of order.

Replay fails on a request it cannot answer, but a recorded call that never came is as much
a change: a fix that silently skips the "delete record" call would pass. So at the end of a
run the recorded exchanges are compared with those served: an exchange never served is
*unused*; one served after an exchange recorded later than it is *out of order*. ``exec
--strict`` and the pytest plugin's ``strict=True`` fail the run on either; without strict,
out-of-order answers are still reported (WireMock's ``verify`` and mastra's strict mode do
the same).

Served exchanges come from the proxy's journal (``hit`` events), in the order they were
answered; the recording from the store or the admin API. Exchanges replayed copies were
made from, or that came from other cassettes, are not this cassette's to account for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recorded exchange, as a tape lists it."""

    seq: int
    method: str
    url: str

    @property
    def call(self) -> str:
        return f"#{self.seq} {self.method} {self.url}"


@dataclass(frozen=True, slots=True)
class Early:
    """An exchange answered before one recorded ahead of it had been."""

    exchange: Recorded
    after: int
    """The seq answered before it, though recorded after it."""


@dataclass(frozen=True, slots=True)
class Tape:
    cassette: str
    unused: tuple[Recorded, ...]
    out_of_order: tuple[Early, ...]

    def failed(self, strict: bool) -> bool:
        """Under strict, either finding fails the run; else none does."""
        return strict and bool(self.unused or self.out_of_order)

    def lines(self, strict: bool) -> list[str]:
        """What to tell people, a line each: out-of-order answers always, unused exchanges
        under strict (without it, a run that asks for less is not news)."""
        found = [
            f"{self.cassette}: recorded but never asked for: {r.call}"
            for r in (self.unused if strict else ())
        ]
        found += [
            f"{self.cassette}: answered out of recorded order: {e.exchange.call} (after #{e.after})"
            for e in self.out_of_order
        ]
        return found

    def document(self) -> dict[str, Any]:
        return {
            "cassette": self.cassette,
            "unused": [{"seq": r.seq, "method": r.method, "url": r.url} for r in self.unused],
            "out_of_order": [
                {
                    "seq": e.exchange.seq,
                    "method": e.exchange.method,
                    "url": e.exchange.url,
                    "after": e.after,
                }
                for e in self.out_of_order
            ],
        }


def read_tape(cassette: str, recorded: Sequence[Recorded], served: Iterable[int]) -> Tape:
    """The tape of ``cassette`` (its exchanges ``recorded``) after a run that was served the
    seqs ``served``, in the order they were answered."""
    by_seq = {r.seq: r for r in recorded}
    seen: set[int] = set()
    latest = -1
    early: list[Early] = []
    for seq in served:
        if seq not in by_seq:
            continue
        if seq < latest:
            early.append(Early(by_seq[seq], latest))
        latest = max(latest, seq)
        seen.add(seq)
    unused = tuple(r for r in recorded if r.seq not in seen)
    return Tape(cassette, unused, tuple(early))
