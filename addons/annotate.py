"""Response headers that tell a client what freezeframe did with its request.

Off by default, because they are bytes the upstream never sent; ``FREEZEFRAME_ANNOTATE=1``
(or ``--annotate``) turns them on for a test harness that wants to assert it was replayed,
and from which recording, without reading the proxy's log. The recording itself never
carries them.
"""

from __future__ import annotations

from collections.abc import Sequence

from freezeframe.storage import Header

HIT = b"x-freezeframe-hit"
"""On a replayed answer: ``<cassette>#<seq>``, the recording served."""
DRIFT = b"x-freezeframe-drift"
"""On a replayed answer whose request differed in stripped parts: those parts, comma-separated."""
REWRITE = b"x-freezeframe-rewrite"
"""On a replayed answer that was changed on the way: what was rewritten, comma-separated."""
MISS = b"x-freezeframe-miss"
"""On freezeframe's miss answer: the cassette that had no recording."""
RECORDED = b"x-freezeframe-recorded"
"""On a forwarded answer being recorded: ``<cassette>#<seq>``, where it will be stored."""
PERTURBED = b"x-freezeframe-perturbed"
"""On a replayed answer that ``--perturb`` changed: what was done (``429 retry-after 1``)."""


def hit(
    cassette: str, seq: int, drift: Sequence[str] = (), rewrites: Sequence[str] = ()
) -> tuple[Header, ...]:
    headers = [(HIT, _value(f"{cassette}#{seq}"))]
    if drift:
        headers.append((DRIFT, _value(", ".join(drift))))
    if rewrites:
        headers.append((REWRITE, _value(", ".join(rewrites))))
    return tuple(headers)


def perturbed(description: str) -> tuple[Header, ...]:
    return ((PERTURBED, _value(description)),)


def miss(cassette: str) -> tuple[Header, ...]:
    return ((MISS, _value(cassette)),)


def recorded(cassette: str, seq: int) -> tuple[Header, ...]:
    return ((RECORDED, _value(f"{cassette}#{seq}")),)


def _value(text: str) -> bytes:
    """ASCII, with anything else escaped: a JSON path may name a member in any script."""
    return text.encode("ascii", "backslashreplace")
