"""Choosing a base for each body, so that a growing conversation is stored about once.

An agent's request repeats its whole conversation so far, so without deltas the bytes
stored grow with the square of the number of turns. A body stored against a base (see
storage.blobs) costs roughly what it adds to the base, so the best base is the previous
request of the same conversation; but the chain of bases is what a reader decompresses,
so it must stay short. Bases are chosen as skip-deltas in base 4 (Subversion's are in
base 2): the bodies of one conversation, its *line*, are numbered 0, 1, 2, … and body
``i`` is stored against body ``i - 4**v``, 4**v being the largest power of 4 that divides
``i``. Body 5 is stored against 4, 6 against 5, 8 against 4, 16 against 0. Reading body
``i`` takes as many decompressions as the sum of ``i``'s digits in base 4 (at most 12 in
a line of LINE_LENGTH), plus one: a line's first body may be stored against the first
body of another line, one stored on its own, for the system prompt and tool schemas they
share. Each body holds the 4**v turns its base lacks, so a line of n turns stores about
log4(n) / 2 + 1 times what it says (2.3 times for 60 turns, 3.2 for 200), where whole
bodies would store n / 2 times.

Which line a body continues is decided by the bytes alone: the line whose latest body
shares the most with it at both ends (the conversation so far at the start, and the tool
schemas and settings an SDK sends after the messages at the end), if that is at least
half of the shorter one; else it starts a line. Nothing here needs to be right for a body
to be read back byte-exact: a base only makes the stored delta smaller, and the writer
checks that the base is stored before it names it.

Not thread-safe: the store's one writer thread owns its Lines.
"""

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

DELTA_LIMIT = 8 * 1024 * 1024
"""Bodies larger than this are stored on their own: the writer would hold too many."""

LINE_LENGTH = 256
"""Bodies per line: the 257th starts a new line, so no chain is longer than 13 bases."""

LINES_PER_GROUP = 4
"""Conversations followed at once per endpoint (an agent, its sub-agents, a summarizer)."""

PLANS_KEPT = 1024
"""Bodies whose base is remembered, so that a body written again is planned the same."""

BUDGET = 64 * 1024 * 1024
"""Bytes of bodies the writer keeps as possible bases, least recently used dropped first."""


@dataclass(frozen=True)
class Base:
    """A stored body another body is compressed against: its digest and raw bytes."""

    name: str
    data: bytes


@dataclass(frozen=True)
class _Item:
    index: int
    name: str
    data: bytes


@dataclass
class _Line:
    """The bodies a line's next ones may be stored against: the latest body and the chain
    of bases it was stored against, back to the first; the next body's base is always
    one of them."""

    spine: list[_Item]
    based: bool
    """Whether the first body was stored against another line's first body."""

    @property
    def latest(self) -> _Item:
        return self.spine[-1]

    @property
    def size(self) -> int:
        return sum(len(item.data) for item in self.spine)

    def append(self, name: str, data: bytes) -> Base:
        """Add the next body; returns its base."""
        index = self.latest.index + 1
        step = 1
        while index % (4 * step) == 0:
            step *= 4
        base_index = index - step
        while self.spine[-1].index != base_index:
            self.spine.pop()
        base = self.spine[-1]
        self.spine.append(_Item(index, name, data))
        return Base(base.name, base.data)


class Lines:
    """The lines being followed, per group (for the writer: cassette, endpoint and what
    the body is: a request body or a canonical form)."""

    def __init__(self, budget: int = BUDGET) -> None:
        self._budget = budget
        self._size = 0
        self._groups: OrderedDict[Hashable, list[_Line]] = OrderedDict()
        self._planned: OrderedDict[str, str | None] = OrderedDict()

    def base_for(self, group: Hashable, name: str, data: bytes) -> Base | None:
        """The base to store the body ``data`` (digest ``name``) against, and remember it
        as the newest body of its line; None: store it on its own. A body planned before
        (the same request again, or a batch written again) gets the same answer."""
        if not data or len(data) > DELTA_LIMIT:
            return None
        if name in self._planned:
            self._planned.move_to_end(name)
            return self._kept(group, self._planned[name])
        base = self._plan(group, name, data)
        self._planned[name] = None if base is None else base.name
        if len(self._planned) > PLANS_KEPT:
            self._planned.popitem(last=False)
        self._evict()
        return base

    def _plan(self, group: Hashable, name: str, data: bytes) -> Base | None:
        lines = self._groups.setdefault(group, [])
        self._groups.move_to_end(group)
        line, shared = _best(lines, data)
        if line is not None:
            lines.remove(line)
            if 2 * shared >= min(len(line.latest.data), len(data)) and (
                line.latest.index + 1 < LINE_LENGTH
            ):
                lines.append(line)
                before = line.size
                base = line.append(name, data)
                self._size += line.size - before
                return base
            lines.append(line)
        root = next((line.spine[0] for line in reversed(lines) if not line.based), None)
        lines.append(_Line([_Item(0, name, data)], based=root is not None))
        self._size += len(data)
        if len(lines) > LINES_PER_GROUP:
            self._size -= lines.pop(0).size
        return None if root is None else Base(root.name, root.data)

    def _kept(self, group: Hashable, name: str | None) -> Base | None:
        """The base named ``name`` if the group still keeps it."""
        for line in self._groups.get(group, ()):
            for item in line.spine:
                if item.name == name:
                    return Base(item.name, item.data)
        return None

    def _evict(self) -> None:
        while self._size > self._budget and self._groups:
            _, lines = self._groups.popitem(last=False)
            self._size -= sum(line.size for line in lines)


def _best(lines: list[_Line], data: bytes) -> tuple[_Line | None, int]:
    """The line whose latest body shares the most with ``data`` at both ends, and how much."""
    best, most = None, -1
    for line in lines:
        shared = common_ends(line.latest.data, data)
        if shared > most:
            best, most = line, shared
    return best, most


def common_ends(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix plus that of the longest common suffix (at
    most the shorter length), by bisection over memcmp: no copies. Each step compares only
    the bytes past what is known to match, so a body costs its length once, not once per
    step (a growing conversation's bodies are megabytes, compared every turn)."""
    shortest = min(len(a), len(b))
    view = memoryview(a)
    prefix = _bisect(shortest, lambda low, n: b.startswith(view[low:n], low))
    end_a, end_b = len(a), len(b)
    suffix = _bisect(
        shortest - prefix,
        lambda low, n: b.endswith(view[end_a - n : end_a - low], 0, end_b - low),
    )
    return prefix + suffix


def _bisect(high: int, holds: Callable[[int, int], bool]) -> int:
    """The largest n in 0..high for which the first n bytes match, given ``holds(low, n)``:
    whether bytes ``low`` to ``n`` match, those before ``low`` being known to."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if holds(low, middle):
            low = middle
        else:
            high = middle - 1
    return low
