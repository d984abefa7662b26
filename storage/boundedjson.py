"""JSON from traffic and from files read with a bound on nesting.

Python's parser recurses once per level and raises RecursionError (not ValueError) near a
thousand levels; what a parse gives back can still be too deep for the recursive code that
walks, encodes or renders it later. A request body 100k levels deep is easy to send, so every
place that parses JSON it did not write reads it here: a document deeper than MAX_DEPTH is
refused with TooDeep, a ValueError, which callers already treat as "not JSON" (opaque text,
or a one-line error naming the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import cast

MAX_DEPTH = 256
"""The deepest nesting read as JSON, as canonicalize.jsonbody keys it: real API bodies stay
far shallower."""

_COUNT_UP_TO = 64 * 1024 * 1024
"""Up to this length, a text with fewer brackets than MAX_DEPTH is known shallow without a
walk; counting runs at C speed."""


class TooDeep(ValueError):
    """A JSON document nested deeper than the bound."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"nests deeper than {max_depth} levels")


def loads(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> object:
    """``json.loads``, refusing a document nested deeper than ``max_depth`` with TooDeep."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if not isinstance(value, dict | list) or not _may_nest(data, max_depth):
        return value
    if nests_deeper_than(max_depth, value):
        raise TooDeep(max_depth)
    return value


def _may_nest(data: str | bytes | bytearray, max_depth: int) -> bool:
    if len(data) > _COUNT_UP_TO:
        return True
    if isinstance(data, str):
        return data.count("[") + data.count("{") > max_depth
    return data.count(b"[") + data.count(b"{") > max_depth


def nests_deeper_than(max_depth: int, value: object) -> bool:
    """Whether a parsed value nests deeper than ``max_depth``, measured level by level
    without recursion (it may be as deep as the parser allowed)."""
    level: list[object] = [value] if isinstance(value, dict | list) else []
    for _ in range(max_depth):
        if not level:
            return False
        deeper: list[object] = []
        for container in level:
            children: Iterable[object] = (
                container.values() if isinstance(container, dict) else cast(list[object], container)
            )
            deeper.extend(child for child in children if isinstance(child, dict | list))
        level = deeper
    return bool(level)
