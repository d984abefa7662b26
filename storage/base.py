"""The store interface: the verbs the proxy, the admin app and the CLI use.

A store holds cassettes, each an ordered list of exchanges. It is written from the
proxy's request path, so the writing verbs (reserve, submit, count) never wait on
disk or network; reads may. Use ``storage.open_store(url)`` to get one.

    with open_store("sqlite:///.freezeframe/freezeframe.db") as store:
        slot = store.reserve("default", key)          # when the request arrives
        store.submit(NewExchange(..., slot=slot))     # when it has ended, any way
        recorded = store.lookup("default", key, 0)    # on replay
"""

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from storage.records import (
    Candidate,
    CassetteSummary,
    Exchange,
    ExchangeSummary,
    NewExchange,
    Slot,
    VerifyReport,
)


class Store(ABC):
    """Cassettes of recorded exchanges, addressed by request key and occurrence.

    count(), lookup() and has_cassette() include exchanges that were submitted but
    not yet written, because the proxy asks them about its own recent requests.
    The listing verbs (cassettes, exchanges, exchange, candidates, verify) show what
    has been written; call flush() first to include the rest.
    """

    @abstractmethod
    def reserve(self, cassette: str, key: str) -> Slot:
        """Claim the next position in a cassette for a request that has just arrived.

        Positions are taken at arrival so that concurrent requests are recorded in
        the order the client sent them. A cassette that already has recordings
        continues after them: nothing is ever overwritten. Thread-safe, and works
        from memory after the first call for a cassette.
        """

    @abstractmethod
    def submit(self, exchange: NewExchange) -> None:
        """Hand over a finished exchange to be written in the background.

        Returns at once; the write happens on the store's writer thread. Raises
        StoreClosed after close().
        """

    @abstractmethod
    def flush(self, timeout: float | None = None) -> None:
        """Wait until every exchange submitted so far has been written.

        Raises StoreError if that takes longer than ``timeout`` seconds.
        """

    @abstractmethod
    def count(self, cassette: str, key: str) -> int:
        """How many recordings of this key the cassette has, counting submitted ones."""

    @abstractmethod
    def lookup(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        """The recording with this key and occurrence, bodies loaded; None if there is none.

        A recording that was submitted but not yet written is waited for.
        """

    @abstractmethod
    def has_cassette(self, name: str) -> bool:
        """Whether the cassette holds any recording, counting submitted ones."""

    @abstractmethod
    def candidates(
        self, cassette: str, method: str, host: str, path: str, limit: int = 200
    ) -> list[Candidate]:
        """Recorded requests to compare a missed request against, likeliest first.

        Those with the same method, host and path (query string ignored) come first,
        then the rest of the cassette, up to ``limit``.
        """

    @abstractmethod
    def cassettes(self) -> list[CassetteSummary]:
        """Every cassette in the store, by name."""

    @abstractmethod
    def exchanges(self, cassette: str) -> list[ExchangeSummary]:
        """The cassette's exchanges in seq order. Raises CassetteNotFound."""

    @abstractmethod
    def exchange(self, cassette: str, seq: int) -> Exchange:
        """One whole exchange. Raises CassetteNotFound or ExchangeNotFound."""

    @abstractmethod
    def verify(self, cassette: str) -> VerifyReport:
        """Re-compute the cassette's hash chain and report the first break, if any.

        Raises CassetteNotFound.
        """

    @abstractmethod
    def close(self) -> None:
        """Write everything submitted, then release connections. Safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
