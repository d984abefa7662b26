"""The exchanges of a cassette as every export reads them: one at a time, in recorded order.

Only the listing is held; each exchange is read whole (large bodies as references) when its
turn comes, so an export's memory does not grow with the cassette. ``Current`` keeps the
last one read at hand for the readers that take them through evidence's conversation
reader, which reads each model call against the ones before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from freezeframe.storage import Exchange, ReadStore


def each_exchange(
    store: ReadStore, cassette: str, progress: Callable[[int], None]
) -> Iterator[Exchange]:
    for summary in store.exchanges(cassette):
        yield store.exchange(cassette, summary.seq)
        progress(1)


class Current:
    """Exchanges read one at a time, the last one read kept in ``current``."""

    def __init__(self, source: Iterator[Exchange]) -> None:
        self._source = source
        self.current: Exchange | None = None

    def __iter__(self) -> Iterator[Exchange]:
        return self

    def __next__(self) -> Exchange:
        self.current = next(self._source)
        return self.current
