"""The store interface: the verbs the proxy, the admin app and the CLI use.

A store holds cassettes, each an ordered list of exchanges. It is written from the
proxy's request path, so the writing verbs (reserve, submit, count) never wait on
disk or network; reads may. Use ``storage.open_store(url)`` to get one.

    with open_store("sqlite:///.freezeframe/freezeframe.db") as store:
        slot = store.reserve("default", key)          # when the request arrives
        store.submit(NewExchange(..., slot=slot))     # when it has ended, any way
        recorded = store.lookup("default", key, 0)    # on replay

A body too large to hold in memory is streamed in through a blob writer and out
through read_blob(), part by part:

        writer = store.blob_writer()
        for chunk in body:                            # on the event loop, per chunk
            writer.write(chunk)
        response = RecordedResponse(..., body=b"", body_ref=writer.finish())
        store.submit(NewExchange(..., response=response, slot=slot))
        for part in store.read_blob(recorded.response.body_ref): ...
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator
from types import TracebackType
from typing import Self

from storage.records import (
    BlobRef,
    Candidate,
    CassetteSummary,
    Exchange,
    ExchangeSummary,
    NewExchange,
    Slot,
    VerifyReport,
)


class BlobWriter(ABC):
    """One body being written to the store as a stream of chunks.

    write() is called on the proxy's event loop for every chunk, so it never waits
    on the database: it hashes and compresses as it goes and spools compressed parts
    to a temporary file, holding at most one part (storage.blobs.PART_SIZE) in
    memory. finish() hands the spooled body to the store's writer thread; abort()
    throws it away. A writer still open when its store closes is aborted.
    """

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Add the next chunk of the body.

        Raises StoreError after finish() or abort() or when the spool cannot be
        written (the writer is then aborted), and StoreClosed once the store closed.
        """

    @abstractmethod
    def finish(self) -> BlobRef:
        """End the body and hand it to the store; returns its reference.

        The body is written before any exchange submitted after this call, so an
        exchange that references it is never durable without it; a body the store
        already holds is stored only once. Calling it again returns the same
        reference. Raises StoreError after abort(), StoreClosed once the store closed.
        """

    @abstractmethod
    def abort(self) -> None:
        """Throw the body away and delete its spool. Does nothing after finish(), or twice."""


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

        A body larger than storage.blobs.INLINE_LIMIT is not loaded: it comes back
        as b"" with a body_ref to read_blob() instead. A recording that was
        submitted but not yet written is waited for.
        """

    @abstractmethod
    def blob_writer(self) -> BlobWriter:
        """A writer for one body to be streamed into the store (see BlobWriter).

        Reference the finished body from an exchange with ``body=b""`` and
        ``body_ref=writer.finish()``. Raises StoreClosed after close().
        """

    @abstractmethod
    def read_blob(self, ref: BlobRef) -> Iterator[bytes]:
        """The body ``ref`` names, decompressed, in pieces of at most PART_SIZE bytes.

        Finds the body before returning, so that a missing one raises StoreError
        here; then reads one part at a time, never the whole body. The iterator
        raises StoreError if a part is damaged or, at its end, if what it yielded
        does not match ``ref``: by then the pieces are sent, so the error is how a
        reader tells a damaged body from a complete one.
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
        """One whole exchange, large bodies as references as in lookup().

        Raises CassetteNotFound or ExchangeNotFound.
        """

    @abstractmethod
    def verify(self, cassette: str) -> VerifyReport:
        """Re-compute the cassette's hash chain and report the first break, if any.

        Raises CassetteNotFound.
        """

    @abstractmethod
    def close(self) -> None:
        """Abort unfinished blob writers, write everything submitted, then release
        connections. Safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
