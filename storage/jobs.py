"""What a store is asked to write, as typed jobs: the one way anything but a recording
changes a store (Store.write).

Each job is a frozen dataclass naming what it changes and, by its base ``Job[T]``, what it
answers (``Fork`` answers ``Forked``). The store's writer runs it after everything submitted
before it, in a transaction of its own, wherever the writer runs (a thread, or a process of
its own: then the job and its answer cross pickled), and keeps its own caches right as it
does (the blobs it knows stored, its search state), so no caller has to tell it what changed
(datasette's ``execute_write_fn`` is the pattern: one writer, work handed to it).

An import is the one job that carries something to read: the exchanges to write, consumed by
the writer while the import's transaction is open (Store.import_cassette). A list pickles; a
generator reading a file reads it where the writer thread runs, which is why an import into a
store written by a process of its own is refused unless what it carries can cross.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from freezeframe.storage.records import (
    Collected,
    Edit,
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


class Job[T]:
    """A change the store's writer makes; ``T`` is what it answers."""


@dataclass(frozen=True)
class Fork(Job[Forked]):
    """Copy ``source`` (up to seq ``upto``) into the new cassette ``into`` (Store.fork)."""

    source: str
    into: str
    upto: int | None = None
    edits: Mapping[int, Edit] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Planned:
    """One exchange of a rekey: its form when it was read, and its key as computed now."""

    seq: int
    key: str
    occurrence: int
    canonical: bytes
    """The canonical form it had when read, which the chain as it stands covers."""
    rekeyed: Rekeyed


@dataclass(frozen=True)
class Rekey(Job[list[KeyChange]]):
    """Write the keys planned for every exchange of ``cassette``, in seq order (Store.rekey:
    the plan is read and computed by the caller, and refused here if the cassette changed
    since)."""

    cassette: str
    planned: tuple[Planned, ...]


@dataclass(frozen=True)
class Remove(Job[Removed]):
    """Delete ``cassette`` and the bodies no other cassette uses (Store.remove)."""

    cassette: str


@dataclass(frozen=True)
class Collect(Job[Collected]):
    """Delete what no exchange names, stored more than ``grace`` seconds ago (Store.collect)."""

    grace: float = 3600.0
    dry_run: bool = False


@dataclass(frozen=True)
class MoveBodies(Job[int]):
    """Move every body to ``target``: ``sql`` or an object store URL (Store.move_bodies)."""

    target: str


@dataclass(frozen=True)
class AddNote(Job[None]):
    """Keep a case note, on a cassette or one of its exchanges (Store.add_note)."""

    note: Note


@dataclass(frozen=True)
class SetSignals(Job[None]):
    """Replace the signals of ``cassette``'s exchanges, by seq (Store.store_signals)."""

    cassette: str
    signals: Mapping[int, Signals]


@dataclass(frozen=True)
class KeepRecheck(Job[None]):
    """Keep a recheck's result as its group's last (Store.keep_recheck)."""

    result: RecheckResult


@dataclass(frozen=True)
class KeepTape(Job[None]):
    """Keep a replay's tape as its cassette's last (Store.keep_tape)."""

    tape: TapeRecord


@dataclass(frozen=True)
class Import(Job[ImportedCassette]):
    """Write ``exchanges`` as the new cassette ``cassette`` in one transaction
    (Store.import_cassette)."""

    cassette: str
    exchanges: Iterable[Imported]
    origin: ForkOrigin | None = None
    notes: Sequence[Note] = ()
