"""Counts in words, for every place that says how many of something there are.

"removed the 1 exchanges" read as a bug: the CLI, the proxy's log and the case file count
through ``plural`` alike.
"""

from __future__ import annotations


def plural(count: int, word: str) -> str:
    """``1 exchange``, ``2 exchanges``, ``2 misses``, ``0 bodies``."""
    if count == 1:
        return f"{count} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return f"{count} {word[:-1]}ies"
    return f"{count} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{count} {word}s"
