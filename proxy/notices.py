"""What the proxy tells its user about a setting that will not do what they meant.

A replay pointed at a cassette with no recordings is almost always a typo (``bug-8812`` for
``bug-8821``). It still starts and answers every request with a miss, as it must, but it says
so once, at start and on every switch to such a cassette, with the names it does know, the
closest first.
"""

from __future__ import annotations

from freezeframe.storage import ReadStore
from freezeframe.storage.names import closest_names

NAMES_SHOWN = 5


def empty_cassette(store: ReadStore, cassette: str) -> str | None:
    """A one-line warning when ``cassette`` has no recordings; None when it has some."""
    known = _known(store, cassette)
    if known is None:
        return None
    if not known:
        return f"cassette {cassette!r} has no recordings, and the store has no cassettes yet"
    return f"cassette {cassette!r} has no recordings; every request will miss. Known: {known}"


def nothing_to_replay(store: ReadStore, cassette: str) -> str | None:
    """Why ``exec --mode replay`` refuses to start its command, or None when it need not: a
    cassette with no recordings would only answer misses, and the agent's own traceback
    (25 lines of it) hid the one line that said why."""
    known = _known(store, cassette)
    if not known:  # it has recordings, or nothing was recorded anywhere to mistake it for
        return None
    return (
        f"cassette {cassette!r} has no recordings (known: {known}), so a replay could only miss: "
        "nothing was run; record it first with --mode record"
    )


def _known(store: ReadStore, cassette: str) -> str | None:
    """None when ``cassette`` has recordings; else the names the store does hold, closest
    first ("" when it holds none)."""
    if store.has_cassette(cassette):
        return None
    names = store.cassette_names()
    close = closest_names(cassette, names, NAMES_SHOWN)
    shown = close + [name for name in names if name not in close]
    more = len(shown) - NAMES_SHOWN
    return ", ".join(shown[:NAMES_SHOWN]) + (f", and {more} more" if more > 0 else "")
