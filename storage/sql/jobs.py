"""How the writer does a job (storage.jobs), an import aside: each in one transaction of its
own that other writers wait for (storage.sql.engine.exclusive), on a connection of the
writer's pool, after everything queued before it is written (storage.sql.writer).

Tickets carry a job to the writer and its answer back: ``Waiting`` for a caller in this
process, which waits on it; the writer process answers over its channel instead
(storage.sql.writerchild).
"""

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import Connection, Engine, select

from freezeframe.storage.errors import CassetteNotFound, ExchangeNotFound, StoreError
from freezeframe.storage.jobs import (
    AddNote,
    Collect,
    Fork,
    Job,
    KeepRecheck,
    KeepTape,
    MoveBodies,
    Rekey,
    Remove,
    SetSignals,
)
from freezeframe.storage.objects import Outbox, open_blob_store
from freezeframe.storage.sql import move, rekey, triage
from freezeframe.storage.sql.engine import exclusive, unavailable
from freezeframe.storage.sql.fork import fork
from freezeframe.storage.sql.gc import collect
from freezeframe.storage.sql.remove import remove_cassette
from freezeframe.storage.sql.schema import cassettes, exchanges


class Ticket(ABC):
    """A job on its way to the writer: the writer answers it once, with what the job
    returned or what it raised (to a caller in this process, or over the writer
    process's channel)."""

    def __init__(self, job: Job[Any]) -> None:
        self.job = job

    def cancelled(self) -> bool:
        """Whether the caller stopped waiting (Ctrl-C): an import then rolls back."""
        return False

    @abstractmethod
    def answer(self, result: object, error: BaseException | None) -> None: ...


class Waiting[T](Ticket):
    """A ticket whose caller waits for it in this process."""

    def __init__(self, job: Job[T], on_cancel: Callable[[], None] | None = None) -> None:
        super().__init__(job)
        self.on_cancel = on_cancel
        """Called once the caller cancels (the writer process is told so)."""
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._result: object = None
        self._error: BaseException | None = None

    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Tell the writer the caller stopped waiting (it waits on for the answer)."""
        self._cancelled.set()
        if self.on_cancel is not None:
            self.on_cancel()

    def answer(self, result: object, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._done.set()

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def result(self) -> T:
        """What the job answered; raises what it raised."""
        if self._error is not None:
            raise self._error
        return cast("T", self._result)


def forgets_stored(job: Job[Any]) -> bool:
    """Whether ``job`` may delete blobs or search values: the writer then forgets which it
    knows to be stored."""
    return isinstance(job, Remove | MoveBodies) or (isinstance(job, Collect) and not job.dry_run)


def perform(job: Job[Any], engine: Engine, where: str, objects: Outbox | None) -> object:
    """Do ``job`` (not an import) and answer what it answers."""
    if isinstance(job, MoveBodies):
        with unavailable(f"cannot move the bodies of store {where}", engine):
            if job.target != "sql":
                return move.into_objects(engine, open_blob_store(job.target))
            if objects is None:
                raise StoreError(
                    "--to sql moves bodies back from object storage: say which with "
                    "--blobs URL (FREEZEFRAME_BLOBS)"
                )
            return move.into_database(engine, objects.objects)
    with _exclusive(_what(job, where), engine) as conn:
        if isinstance(job, Fork):
            return fork(conn, job.source, job.into, job.upto, job.edits, where)
        if isinstance(job, Rekey):
            changes = rekey.plan(job.planned)
            planned = {entry.seq: entry for entry in job.planned}
            rekey.apply(conn, engine, job.cassette, planned, {c.seq: c for c in changes})
            return changes
        if isinstance(job, Remove):
            return remove_cassette(conn, job.cassette, where)
        if isinstance(job, Collect):
            return collect(conn, job.grace, dry_run=job.dry_run, objects=objects)
        if isinstance(job, AddNote):
            _check_noted(conn, job, where)
            triage.add_note(conn, job.note)
            return None
        if isinstance(job, SetSignals):
            triage.store_signals(conn, job.cassette, job.signals)
            return None
        if isinstance(job, KeepRecheck):
            triage.keep_recheck(conn, job.result)
            return None
        if isinstance(job, KeepTape):
            triage.keep_tape(conn, job.tape)
            return None
    raise TypeError(f"the store's writer does not know the job {type(job).__name__}")


def _check_noted(conn: Connection, job: AddNote, where: str) -> None:
    """Refuse a note on a cassette, or an exchange, the store does not hold."""
    note = job.note
    found = conn.scalar(select(cassettes.c.id).where(cassettes.c.name == note.cassette))
    if found is None:
        raise CassetteNotFound(note.cassette, where)
    if note.seq is not None:
        held = select(exchanges.c.id).where(
            exchanges.c.cassette_id == found, exchanges.c.seq == note.seq
        )
        if conn.scalar(held) is None:
            raise ExchangeNotFound(note.cassette, note.seq)


def _what(job: Job[Any], where: str) -> str:
    """What failed, for the one line a database error becomes."""
    if isinstance(job, Fork):
        return f"cannot fork cassette {job.source!r} in store {where}"
    if isinstance(job, Rekey):
        return f"cannot rekey in store {where}"
    if isinstance(job, Remove):
        return f"cannot remove cassette {job.cassette!r} from store {where}"
    if isinstance(job, Collect):
        return f"cannot collect garbage in store {where}"
    if isinstance(job, AddNote):
        return f"cannot keep a note in store {where}"
    if isinstance(job, SetSignals):
        return f"cannot store signals in store {where}"
    if isinstance(job, KeepRecheck):
        return f"cannot keep a recheck in store {where}"
    return f"cannot keep a tape in store {where}"


@contextmanager
def _exclusive(what: str, engine: Engine) -> Iterator[Connection]:
    with unavailable(what, engine):
        with exclusive(engine) as conn:
            yield conn
