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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

from freezeframe.storage.records import (
    BlobRef,
    Candidate,
    CassetteSummary,
    Collected,
    Edit,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    Forked,
    ForkOrigin,
    Imported,
    ImportedCassette,
    KeyChange,
    Miss,
    NewExchange,
    Note,
    RecheckResult,
    Rekeyed,
    Removed,
    RunOverview,
    SearchHit,
    Signals,
    Slot,
    TapeRecord,
    TriageRow,
    VerifyReport,
)
from freezeframe.storage.stats import WriterStats

if TYPE_CHECKING:
    from freezeframe.storage.jobs import Job


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
    has been written; call flush() first to include the rest. So do drift notes.
    """

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, as its URL with any password masked: safe to log or show."""

    @abstractmethod
    def health(self) -> str | None:
        """None when the store is answering and the last exchange submitted could be
        written; else one line saying what is wrong. Asks the database (a trivial read)."""

    @abstractmethod
    def stats(self) -> WriterStats:
        """What the store has written since it was opened (exchanges, bodies stored and
        deduplicated, time spent committing) and how much waits to be written: the figures
        a metrics scrape reports. Never touches the database."""

    # The verbs below import the jobs when called: defining them costs every command's start
    # a few milliseconds, and most commands only read.
    @abstractmethod
    def write[T](self, job: "Job[T]") -> T:
        """Have the store's writer do ``job`` (storage.jobs) after everything submitted
        before it, in a transaction of its own, and answer what it answers; whatever it
        raises is raised here. The one way anything but a recording is written: the verbs
        below (fork, remove, collect, add_note, ...) are each one job. A Ctrl-C while it
        waits cancels an import (which rolls back), and waits for the job to end."""

    def move_bodies(self, target: str) -> int:
        """Move every body into the object store at ``target`` (``s3://BUCKET[/PREFIX]``),
        or, with ``sql``, back from the object store this store was opened with into the
        database; how many bodies moved. Safe while proxies record (storage.sql.move)."""
        from freezeframe.storage import jobs

        return self.write(jobs.MoveBodies(target))

    def outbox(self) -> tuple[bool, int] | None:
        """With bodies in object storage (--blobs): whether the object store answers, and
        how many bytes of bodies wait in the local outbox for it; None without --blobs."""
        return None

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
    def note_drift(
        self, cassette: str, seq: int, paths: Sequence[str], context: Mapping[str, str]
    ) -> None:
        """Note that a replay served exchange ``seq`` to a request whose stripped parts
        ``paths`` differed, sent with run context ``context``.

        Returns at once: the note is written on the writer thread, after every exchange
        submitted before it; one on an exchange the store does not hold is logged and
        dropped. Notes are not part of the chain. Raises StoreClosed after close().
        """

    @abstractmethod
    def note_miss(self, miss: Miss) -> None:
        """Keep a replay miss, as its client was answered, for misses() to list.

        Returns at once: it is written on the writer thread, after every exchange
        submitted before it. Misses are observations, not part of any chain. Raises
        StoreClosed after close().
        """

    @abstractmethod
    def misses(self, cassette: str | None = None, limit: int = 200) -> list[Miss]:
        """The misses kept for ``cassette`` (for every cassette when None), newest first,
        at most ``limit``. A cassette that does not exist has its misses too: a typo'd
        cassette is exactly what a miss can be about. Every miss noted through this store
        before the call is listed (note_miss only queues it for the writer)."""

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
    def flush(self, timeout: float | None = None) -> None:
        """Wait until every exchange submitted so far has been written, and indexed for
        search.

        Raises StoreError if that takes longer than ``timeout`` seconds.
        """

    @abstractmethod
    def count(self, cassette: str, key: str) -> int:
        """How many recordings of this key the cassette has, counting submitted ones."""

    @abstractmethod
    def claim(self, session: str, cassette: str, key: str) -> int:
        """The next occurrence of ``key`` that replay session ``session`` serves, counted in
        the store, so that proxy replicas replaying one session together hand out each
        recording once: 0 for the first claim, and so on. One round trip, atomic."""

    @abstractmethod
    def release(self, session: str) -> None:
        """Start replay session ``session`` from the top: forget what it has claimed."""

    @abstractmethod
    def lookup(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        """The recording with this key and occurrence, bodies loaded; None if there is none.

        A body larger than storage.blobs.INLINE_LIMIT is not loaded: it comes back
        as b"" with a body_ref to read_blob() instead. A recording that was
        submitted but not yet written is waited for.
        """

    @abstractmethod
    def preload(self, cassette: str) -> int:
        """Load the cassette's recordings, in one query, for lookup() to answer from memory
        (storage.replaytable); how many it holds. Once loaded, a cassette is not read again
        until unload(): call it as often as convenient. A recording not held (recorded
        since, or past the table's size) is still found by lookup() in the store."""

    @abstractmethod
    def key_sent(self, cassette: str, digest: bytes) -> str | None:
        """The key of the cassette's preloaded recordings whose request was sent as the bytes
        of ``digest`` (storage.sent), or None: none held, or recordings under two keys. Reads
        memory only, so replay asks it before keying a request in full."""

    @abstractmethod
    def unload(self) -> None:
        """Forget every preloaded cassette, so that the next preload() reads what other
        processes changed since (replay starting from the top)."""

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
        """One whole exchange with its drift notes, large bodies as references as in
        lookup().

        Raises CassetteNotFound or ExchangeNotFound.
        """

    @abstractmethod
    def verify(self, cassette: str) -> VerifyReport:
        """Re-compute the cassette's hash chain and report the first break, if any.

        Raises CassetteNotFound.
        """

    @abstractmethod
    def rekey(
        self, cassette: str, keyer: Callable[[Exchange], Rekeyed], *, dry_run: bool = False
    ) -> list[KeyChange]:
        """Give every exchange of the cassette the key ``keyer`` computes for it now.

        The chain is verified first: a cassette whose chain is broken is refused with a
        StoreError naming the first break, since re-chaining would bury the evidence.
        ``keyer`` is called once per exchange in seq order, with the exchange as
        exchange() reads it (without its drift); occurrences are then numbered per new
        key in seq order, so recordings that now share a key are replayed in the order
        they were recorded. Keys, key schemes, canonical forms and stripped digests are
        rewritten and the cassette re-chained in one transaction; ids, seqs, bodies,
        facts and drift notes are kept. An exception from ``keyer`` changes nothing, and
        neither does ``dry_run``, which only computes what would change.

        Returns every exchange's change in seq order, new equal to old where nothing
        moved. Stop whatever writes to the cassette first (proxies, other stores): one
        that writes meanwhile makes rekey refuse, and writes after it from a store that
        had written to the cassette before would break the chain. Raises
        CassetteNotFound.
        """

    def fork(
        self,
        source: str,
        target: str,
        *,
        upto: int | None = None,
        edits: Mapping[int, Edit] | None = None,
    ) -> Forked:
        """Make the new cassette ``target`` from ``source``'s exchanges up to seq ``upto``
        (all when None), in one transaction, the answers of ``edits`` (by seq) replaced.

        ``source`` is not changed. Bodies are shared. Each copy keeps its seq, occurrence
        and key, carries an Origin (``forked``, or ``edited`` with the edit's changes), and
        the new cassette's chain starts from its provenance, so ``verify`` reports what it
        was forked from and whether the source still holds it. Raises CassetteNotFound,
        or StoreError when ``target`` exists or a seq to edit was not copied.
        """
        from freezeframe.storage import jobs

        return self.write(jobs.Fork(source, target, upto, dict(edits or {})))

    @abstractmethod
    def fork_origin(self, cassette: str) -> ForkOrigin | None:
        """What the cassette was forked from; None when it is no fork. Raises
        CassetteNotFound."""

    def import_cassette(
        self,
        cassette: str,
        exchanges: Iterable[Imported],
        *,
        origin: ForkOrigin | None = None,
        notes: Sequence[Note] = (),
    ) -> ImportedCassette:
        """Write ``exchanges`` as the new cassette ``cassette``, all in one transaction.

        Bodies are stored as any recorded body (deduplicated, as deltas where they grow a
        conversation), drift notes on their exchanges, and the chain is computed afresh.
        ``exchanges`` is consumed on the store's writer thread while the transaction is
        open, so a file is read once and never held whole; recording through this store
        waits meanwhile, and so, on SQLite, does every other process writing to the file.
        Whatever it raises (a bad line in the file, a body that does not match its digest)
        rolls everything back and is raised here, so nothing is half-imported.
        An ``origin`` (an exported fork's) is kept as the new cassette's, its chain starting
        from it as the fork's did, so ``verify`` reports what it was forked from.
        ``notes`` (an export's case notes) are kept on the new cassette in the same
        transaction, so an import never lands without them; one on an exchange the import
        does not hold refuses it.
        Raises StoreError when ``cassette`` exists or a note names no imported exchange,
        ValueError for a fact of the wrong kind.
        """
        from freezeframe.storage import jobs

        return self.write(jobs.Import(cassette, exchanges, origin, tuple(notes)))

    def collect(self, grace: float = 3600.0, *, dry_run: bool = False) -> Collected:
        """Delete the bodies (and canonical forms and transcripts) no exchange names, which
        were stored more than ``grace`` seconds ago, and the search values no exchange
        holds; with ``dry_run`` only count them. Safe while proxies write to the store: a
        body younger than ``grace`` may be named by an exchange still on its way, and one
        deleted as an exchange names it is stored again by the writer."""
        from freezeframe.storage import jobs

        return self.write(jobs.Collect(grace, dry_run))

    def remove(self, cassette: str) -> Removed:
        """Delete the cassette: its exchanges, drift notes, misses and search entries, and
        the bodies, forms and transcripts no other cassette uses, in one transaction.

        Writes what was submitted first. A later recording into the same name starts a new
        cassette at seq 0. Stop any other process that records into the cassette first:
        it counts positions in memory and would carry on where it was. Raises
        CassetteNotFound.
        """
        from freezeframe.storage import jobs

        return self.write(jobs.Remove(cassette))

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

    def store_signals(self, cassette: str, signals: Mapping[int, Signals]) -> None:
        """Replace the signals of the cassette's exchanges (by seq) in one transaction.
        Signals are derived, so the chain is not touched."""
        from freezeframe.storage import jobs

        self.write(jobs.SetSignals(cassette, dict(signals)))

    def add_note(self, note: Note) -> None:
        """Keep a case note. Raises CassetteNotFound for a cassette the store does not
        hold, ExchangeNotFound for a seq it does not have."""
        from freezeframe.storage import jobs

        self.write(jobs.AddNote(note))

    def keep_recheck(self, result: RecheckResult) -> None:
        """Keep ``result`` as its group's last recheck, in place of the one before."""
        from freezeframe.storage import jobs

        self.write(jobs.KeepRecheck(result))

    @abstractmethod
    def rechecks(self) -> dict[str, RecheckResult]:
        """The last recheck of each group that had one, by signature."""

    def keep_tape(self, tape: TapeRecord) -> None:
        """Keep ``tape`` as its cassette's last, in place of the one before."""
        from freezeframe.storage import jobs

        self.write(jobs.KeepTape(tape))

    @abstractmethod
    def tape(self, cassette: str) -> TapeRecord | None:
        """The tape the last replay of ``cassette`` left, or None when none was kept."""

    @abstractmethod
    def notes(self, cassette: str | None = None, seq: int | None = None) -> list[Note]:
        """The notes on ``cassette`` (on every cassette when None), or only those on its
        exchange ``seq``, oldest first."""

    @abstractmethod
    def search_notes(self, query: str, cassette: str | None = None, limit: int = 50) -> list[Note]:
        """The notes holding ``query`` (case-insensitively, whitespace collapsed), newest
        first, at most ``limit``."""

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
