"""The only changes replay makes to recorded bytes, each one named.

Replay is byte-exact by default. At ``instant`` pace, and only then, a recorded
``retry-after`` would make the client sleep for real (the Anthropic SDK sleeps whatever it
says), which defeats the point of an instant replay; so those headers are set to the
smallest value. ``show`` lists these rewrites for every exchange they would touch, so a
reader of the evidence knows what the client was and was not shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage import Header

RETRY_HEADERS = frozenset({b"retry-after", b"retry-after-ms"})
SMALLEST_RETRY = b"0"


@dataclass(frozen=True, slots=True)
class Rewrite:
    header: str
    recorded: str
    replayed: str
    when: str


def instant_rewrites(headers: Sequence[Header]) -> tuple[tuple[Header, ...], tuple[Rewrite, ...]]:
    """The headers as served at ``instant`` pace, and what was changed."""
    rewrites = []
    served = []
    for name, value in headers:
        if name.lower() in RETRY_HEADERS and value != SMALLEST_RETRY:
            rewrites.append(
                Rewrite(
                    header=name.decode("latin-1"),
                    recorded=value.decode("latin-1"),
                    replayed=SMALLEST_RETRY.decode(),
                    when="replay pace instant",
                )
            )
            value = SMALLEST_RETRY
        served.append((name, value))
    return tuple(served), tuple(rewrites)
