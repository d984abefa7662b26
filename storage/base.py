"""The store interface, in roles: each consumer takes the one it needs; a store is all of them.

A store holds cassettes, each an ordered list of exchanges. Who uses one needs a few of its
verbs, so the interface is split by who needs them:

- ReadStore (storage.reading): every reader of recordings (the case file, the read
  commands, evidence, what-if, the exchange formats): the listings, one exchange, search,
  notes, triage's rows, a replay's tape, bodies, a chain's check.
- RecordStore (storage.recording): the proxy's recorder: reserve, submit, submit_durably,
  blob_writer, flush. It never reads, and nothing it calls on the event loop waits.
- ReplayStore (storage.replaying): the proxy's replay: lookup, preload, key_sent, unload,
  claim, release, count, candidates, and its drift and miss notes. It reads too.
- WriteStore (storage.writing): every other change, each a job for the store's writer (fork,
  import, rekey, remove, collect, move bodies, notes, signals, rechecks, tapes). It reads too.

Store is all of them, plus what only whoever opened the store asks of it (where it is, its
health, its writer's figures, closing it), which a store implements (storage.sql.SqlStore).
A consumer that needs two roles (the admin app, metrics, ``resend``) takes a Store.

The roles are ABCs rather than Protocols: the one store names them by inheriting Store, so a
verb it failed to implement is an error when it is made (and to mypy), and the verbs that
are derived (the jobs' one-liners, search_notes) come with them; matching by shape would pay
only for a second store or a fake, and the tests use the real one.

Use ``storage.open_store(url)`` to get one.

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

from abc import abstractmethod
from types import TracebackType
from typing import Self

from freezeframe.storage.recording import RecordStore
from freezeframe.storage.replaying import ReplayStore
from freezeframe.storage.stats import WriterStats
from freezeframe.storage.writing import WriteStore


class Store(ReplayStore, WriteStore, RecordStore):
    """Cassettes of recorded exchanges, addressed by request key and occurrence: every role
    (ReadStore through ReplayStore and WriteStore), and the store as its opener holds it."""

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

    @abstractmethod
    def outbox(self) -> tuple[bool, int] | None:
        """With bodies in object storage (--blobs): whether the object store answers, and
        how many bytes of bodies wait in the local outbox for it; None without --blobs."""

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
