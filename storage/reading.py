"""ReadStore: what every reader of recordings asks a store (storage.base lists every role).

The case file, the read commands, evidence, what-if and the exchange formats only read: the
listings, one exchange, search, notes, triage's rows, a replay's tape, bodies, and a chain's
check. Each takes a ReadStore, so its signature says it changes nothing.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from freezeframe.storage.records import (
    BlobRef,
    CassetteSummary,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    ForkOrigin,
    Miss,
    Note,
    RecheckResult,
    RunOverview,
    SearchHit,
    TapeRecord,
    TriageRow,
    VerifyReport,
)


class ReadStore(ABC):
    """Cassettes of recorded exchanges, read.

    has_cassette() counts exchanges submitted but not yet written, because the proxy asks it
    about its own recent requests. exchanges(), overview() and exchange() first wait for what
    this store submitted to that cassette; misses(), search(), triage_rows() and unsigned()
    for everything it submitted. The other verbs show what has been written (a recorder
    calls RecordStore.flush() first to include the rest).
    """

    @abstractmethod
    def has_cassette(self, name: str) -> bool:
        """Whether the cassette holds any recording, counting submitted ones."""

    @abstractmethod
    def cassette_names(self) -> list[str]:
        """The name of every cassette written to the store, sorted; cheaper than cassettes()."""

    @abstractmethod
    def cassettes(self, where: ExchangeFilter | None = None) -> list[CassetteSummary]:
        """Every cassette in the store, by name.

        With a filter, only the cassettes holding an exchange that matches, and each
        summary's figures (exchanges, first and last times, stored bytes) count the
        matching exchanges alone.
        """

    @abstractmethod
    def exchanges(
        self,
        cassette: str,
        where: ExchangeFilter | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[ExchangeSummary]:
        """The cassette's exchanges in seq order, only those matching ``where`` if given;
        with ``limit``, at most that many after skipping ``offset`` (a page of a long run).

        Raises CassetteNotFound (not for a cassette where nothing matches: that is []).
        """

    @abstractmethod
    def overview(self, cassette: str, where: ExchangeFilter | None = None) -> RunOverview:
        """The figures of the cassette's exchanges that match ``where``, counted in the
        store, so a page of a long run can say them without listing it whole.

        Raises CassetteNotFound.
        """

    @abstractmethod
    def exchange(self, cassette: str, seq: int) -> Exchange:
        """One whole exchange with its drift notes; a body larger than
        storage.blobs.INLINE_LIMIT comes back as b"" with a body_ref to read_blob().

        Raises CassetteNotFound or ExchangeNotFound.
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
    def fork_origin(self, cassette: str) -> ForkOrigin | None:
        """What the cassette was forked from; None when it is no fork. Raises
        CassetteNotFound."""

    @abstractmethod
    def verify(self, cassette: str) -> VerifyReport:
        """Re-compute the cassette's hash chain and report the first break, if any.

        Raises CassetteNotFound.
        """

    @abstractmethod
    def search(self, query: str, cassette: str | None = None, limit: int = 50) -> list[SearchHit]:
        """The exchanges (of ``cassette``, or of all) holding a value that matches ``query``,
        newest first, at most ``limit``.

        ``query`` is one phrase: its words in order, case-insensitively, within one value
        (a JSON string or number, a streamed text joined, a header-like fact, or a whole
        text body; see storage.search). An exchange is searchable once it is listed in
        the store that wrote it (what waits to be indexed is indexed first) and in a store
        opened after it was listed; a store open already in another process finds it up to
        half a second later (storage.sql.writer INDEX_WAIT_S).
        """

    @abstractmethod
    def misses(self, cassette: str | None = None, limit: int = 200) -> list[Miss]:
        """The misses kept for ``cassette`` (for every cassette when None), newest first,
        at most ``limit``. A cassette that does not exist has its misses too: a typo'd
        cassette is exactly what a miss can be about. Every miss noted through this store
        before the call is listed (ReplayStore.note_miss only queues it for the writer)."""

    @abstractmethod
    def notes(self, cassette: str | None = None, seq: int | None = None) -> list[Note]:
        """The notes on ``cassette`` (on every cassette when None), or only those on its
        exchange ``seq``, oldest first."""

    def search_notes(self, query: str, cassette: str | None = None, limit: int = 50) -> list[Note]:
        """The notes holding ``query`` (case-insensitively, whitespace collapsed), newest
        first, at most ``limit``. A filter over notes(), so a store implements notes() alone
        (the SQL store too read every note of the cassette and filtered them here)."""
        wanted = " ".join(query.casefold().split())
        found = [
            note
            for note in self.notes(cassette)
            if wanted and wanted in " ".join(note.text.casefold().split())
        ]
        return found[::-1][:limit]

    @abstractmethod
    def triage_rows(
        self,
        *,
        since: float | None = None,
        cassettes: Sequence[str] | None = None,
        traces: bool = False,
    ) -> list[TriageRow]:
        """The exchanges that carry a failure of their own or of their run (storage.records.
        Signals), and with ``traces`` every model call too (its trace read), of
        ``cassettes`` (every cassette when None), started at ``since`` (epoch seconds) or
        later, in cassette and seq order. Reads no body: what triage needs is stored."""

    @abstractmethod
    def unsigned(self, version: int) -> list[tuple[str, int]]:
        """(cassette, seq) of each exchange whose signals were never worked out, or were
        worked out by rules older than ``version``: what ``triage --rebuild`` visits."""

    @abstractmethod
    def rechecks(self) -> dict[str, RecheckResult]:
        """The last recheck of each group that had one, by signature."""

    @abstractmethod
    def tape(self, cassette: str) -> TapeRecord | None:
        """The tape the last replay of ``cassette`` left, or None when none was kept."""
