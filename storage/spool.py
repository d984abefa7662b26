"""Bodies written as a stream: hashed, compressed and spooled part by part.

The proxy calls write() on its event loop for every chunk of a body that may be
far larger than memory. A call hashes the chunk and, once PART_SIZE bytes have
gathered, compresses them into one part and appends it to an anonymous temporary
file; nothing waits on the database. finish() hands the spool over, as a
SpooledBlob, to the store's writer thread, which copies the parts into the
database and then closes the file. A body of one part never touches the disk.

The spool is an unnamed temporary file where the platform allows (Linux), so not
even a killed process leaves one behind.
"""

import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import IO

import blake3

from freezeframe.storage import blobs
from freezeframe.storage.errors import StoreClosed, StoreError
from freezeframe.storage.recording import BlobWriter
from freezeframe.storage.records import BlobRef

SPOOL_PREFIX = "freezeframe-body-"


class SpooledBlob:
    """A finished body of at least one part, waiting for the writer thread.

    Every part but the last is in the spool file (None when there is only one);
    the last is kept in memory. Whoever holds it must call discard().
    """

    def __init__(
        self, ref: BlobRef, file: IO[bytes] | None, lengths: tuple[int, ...], last: bytes
    ) -> None:
        self.ref = ref
        self.count = len(lengths) + 1
        """How many parts the body has."""
        self.stored_size = sum(lengths) + len(last)
        """The compressed size of all its parts."""
        self._file = file
        self._lengths = lengths
        self._last = last
        self._close = weakref.finalize(self, file.close) if file else None

    def parts(self) -> Iterator[bytes]:
        """The compressed parts in order, read from the spool one at a time."""
        if self._file is not None:
            self._file.seek(0)
            for index, length in enumerate(self._lengths):
                data = self._file.read(length)
                if len(data) != length:
                    raise OSError(f"the spool of body {self.ref.digest[:16]} ends in part {index}")
                yield data
        yield self._last

    def discard(self) -> None:
        """Close and so delete the spool file. Safe to call twice."""
        if self._close is not None:
            self._close()

    def handed(self) -> tuple["SpoolFacts", int | None]:
        """What another process needs to take this body over: its facts, and the spool
        file's descriptor (None for a body of one part). Discard it once they are sent:
        the other process's copy of the descriptor keeps the file."""
        fd = None if self._file is None else self._file.fileno()
        return SpoolFacts(self.ref, self._lengths, self._last), fd

    @classmethod
    def taken(cls, facts: "SpoolFacts", fd: int | None) -> "SpooledBlob":
        """The body another process handed over (handed()), owning the descriptor."""
        file = None if fd is None else open(fd, "rb", closefd=True)  # noqa: SIM115
        return cls(facts.ref, file, facts.lengths, facts.last)


@dataclass(frozen=True)
class SpoolFacts:
    """A spooled body apart from its file: what crosses to the writer process."""

    ref: BlobRef
    lengths: tuple[int, ...]
    last: bytes


class _State(Enum):
    OPEN = "open"
    FINISHED = "finished"
    ABORTED = "aborted"
    CLOSED = "closed"
    """Aborted because the store closed."""


class SpoolWriter(BlobWriter):
    """The BlobWriter of every store: ``hand_over`` queues a finished body for writing
    and raises StoreClosed once the store is closing. Thread-safe, though a body is
    normally written from one thread."""

    def __init__(self, hand_over: Callable[[SpooledBlob], None], where: str) -> None:
        self._hand_over = hand_over
        self._where = where
        self._hasher = blake3.blake3()
        self._size = 0
        self._pending = bytearray()
        self._lengths: list[int] = []
        self._file: IO[bytes] | None = None
        self._close_file: weakref.finalize[[], SpoolWriter] | None = None
        self._state = _State.OPEN
        self._ref: BlobRef | None = None
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._check_open()
            self._hasher.update(data)
            self._size += len(data)
            view = memoryview(data)
            while view:
                # A full part is spooled only once more data comes, so that the
                # last part, which finish() compresses, is never empty.
                if len(self._pending) == blobs.PART_SIZE:
                    self._spool(blobs.compress_part(self._pending))
                    self._pending.clear()
                room = blobs.PART_SIZE - len(self._pending)
                self._pending += view[:room]
                view = view[room:]

    def finish(self) -> BlobRef:
        with self._lock:
            if self._ref is not None:
                return self._ref
            self._check_open()
            ref = BlobRef(self._hasher.hexdigest(), self._size)
            if self._size:
                self._hand_over_spool(ref)
            self._state, self._ref = _State.FINISHED, ref
            return ref

    def abort(self) -> None:
        self._end(_State.ABORTED)

    def store_closed(self) -> None:
        """Abort, unless finished: the store is closing and will take no more bodies."""
        self._end(_State.CLOSED)

    def _end(self, state: _State) -> None:
        with self._lock:
            if self._state is _State.OPEN:
                self._state = state
                self._release()

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise StoreClosed(self._where)
        if self._state is not _State.OPEN:
            raise StoreError(f"this body's writer is {self._state.value}; start another")

    def _spool(self, part: bytes) -> None:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix=SPOOL_PREFIX)
                self._close_file = weakref.finalize(self, self._file.close)
            self._file.write(part)
        except OSError as exc:
            raise self._failed(exc) from exc
        self._lengths.append(len(part))

    def _hand_over_spool(self, ref: BlobRef) -> None:
        last = blobs.compress_part(self._pending)
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as exc:
                raise self._failed(exc) from exc
        # The spooled body takes the file over, with its own finalizer.
        blob = SpooledBlob(ref, self._file, tuple(self._lengths), last)
        if self._close_file is not None:
            self._close_file.detach()
        self._file, self._close_file = None, None
        self._release()
        try:
            self._hand_over(blob)
        except BaseException as exc:
            blob.discard()
            self._state = _State.CLOSED if isinstance(exc, StoreClosed) else _State.ABORTED
            raise

    def _failed(self, exc: OSError) -> StoreError:
        """Abort after the spool could not be written; the error to raise."""
        self._state = _State.ABORTED
        self._release()
        return StoreError(f"cannot spool a body to a temporary file: {exc.strerror or exc}")

    def _release(self) -> None:
        self._pending = bytearray()
        self._lengths = []
        if self._close_file is not None:
            self._close_file()
        self._file, self._close_file = None, None
