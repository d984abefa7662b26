"""WriteStore: every change to a store but a recording, each one job for its writer.

The commands that edit, import, remove, collect or move, retention, triage's rebuild, a
recheck and a strict replay's tape change what a store holds. Each change is a typed job
(storage.jobs) done by write(); the verbs below are one line each over it, so a store
implements write() once instead of one method per change. A writer reads what it changes
(retention lists what it removes, triage reads the rows it signs), so WriteStore extends
ReadStore.
"""

from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from freezeframe.storage.reading import ReadStore
from freezeframe.storage.records import (
    Collected,
    Edit,
    Exchange,
    Forked,
    ForkOrigin,
    Imported,
    ImportedCassette,
    KeyChange,
    Note,
    RecheckResult,
    Rekeyed,
    Removed,
    Signals,
    TapeRecord,
)

if TYPE_CHECKING:
    from freezeframe.storage.jobs import Job


class WriteStore(ReadStore):
    """Cassettes forked, imported, rekeyed and removed; bodies collected and moved; case
    notes, signals, rechecks and tapes kept."""

    # The verbs below import the jobs when called: defining them costs every command's start
    # a few milliseconds, and most commands only read.
    @abstractmethod
    def write[T](self, job: "Job[T]") -> T:
        """Have the store's writer do ``job`` (storage.jobs) after everything submitted
        before it, in a transaction of its own, and answer what it answers; whatever it
        raises is raised here. The one way anything but a recording is written: the verbs
        below (fork, remove, collect, add_note, ...) are each one job. A Ctrl-C while it
        waits cancels an import (which rolls back), and waits for the job to end."""

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

    def collect(self, grace: float = 3600.0, *, dry_run: bool = False) -> Collected:
        """Delete the bodies (and canonical forms and transcripts) no exchange names, which
        were stored more than ``grace`` seconds ago, and the search values no exchange
        holds; with ``dry_run`` only count them. Safe while proxies write to the store: a
        body younger than ``grace`` may be named by an exchange still on its way, and one
        deleted as an exchange names it is stored again by the writer."""
        from freezeframe.storage import jobs

        return self.write(jobs.Collect(grace, dry_run))

    def move_bodies(self, target: str) -> int:
        """Move every body into the object store at ``target`` (``s3://BUCKET[/PREFIX]``),
        or, with ``sql``, back from the object store this store was opened with into the
        database; how many bodies moved. Safe while proxies record (storage.sql.move)."""
        from freezeframe.storage import jobs

        return self.write(jobs.MoveBodies(target))

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

    def keep_tape(self, tape: TapeRecord) -> None:
        """Keep ``tape`` as its cassette's last, in place of the one before."""
        from freezeframe.storage import jobs

        self.write(jobs.KeepTape(tape))
