"""RecordStore: what the proxy's recorder asks a store, from its request path.

addons.record (and ``resend``, which records one exchange) reserves a position when a
request arrives, submits the exchange when it has ended, and streams a large body through
a BlobWriter. None of these waits on disk or network, so the recorder can call them on the
event loop; only submit_durably() and flush() wait, and are called off it.
"""

from abc import ABC, abstractmethod

from freezeframe.storage.records import BlobRef, NewExchange, Slot


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


class RecordStore(ABC):
    """Exchanges handed to the store's writer as they end, in the order they arrived."""

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
        ValueError for a fact with an unknown name or a value of the wrong kind (see
        storage.records.FACT_KINDS), and StoreClosed after close().
        """

    @abstractmethod
    def submit_durably(self, exchange: NewExchange, timeout: float) -> bool:
        """submit(), then wait until the exchange is committed: True once it is, False when
        the store could not write it or ``timeout`` seconds passed. Blocks: call it off the
        event loop."""

    @abstractmethod
    def blob_writer(self) -> BlobWriter:
        """A writer for one body to be streamed into the store (see BlobWriter).

        Reference the finished body from an exchange with ``body=b""`` and
        ``body_ref=writer.finish()``. Raises StoreClosed after close().
        """

    @abstractmethod
    def flush(self, timeout: float | None = None) -> None:
        """Wait until every exchange submitted so far has been written, and indexed for
        search.

        Raises StoreError if that takes longer than ``timeout`` seconds.
        """
