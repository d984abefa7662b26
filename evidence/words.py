"""Counts, sizes and times in words, for every place that says how many of something there
are, how large or when.

"removed the 1 exchanges" read as a bug: the CLI, the proxy's log and the case file count
through ``plural`` alike.
"""

from __future__ import annotations

from datetime import UTC, datetime


def plural(count: int, word: str) -> str:
    """``1 exchange``, ``2 exchanges``, ``2 misses``, ``0 bodies``."""
    if count == 1:
        return f"{count} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return f"{count} {word[:-1]}ies"
    return f"{count} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{count} {word}s"


def when(epoch: float | None) -> str:
    """A stored time as the command line prints it, to the second, in UTC; ``-``: none."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def size(n: int) -> str:
    """A byte count as people read it: 512 B, 1.5 KB, 2.0 MB."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
