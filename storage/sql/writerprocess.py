"""The proxy's side of the writer process (storage.sql.writerchild).

The proxy's store hands what it records to another process, so that committing,
compressing and indexing never take the GIL from the event loop. WriterProcess has the
thread Writer's face (put, flush, stats, stop, failing): SqlStore uses either.

put() pickles the item and sends it at once (storage.sql.channel): an exchange, a note,
a job (storage.jobs) or a streamed body's spool file, whose descriptor crosses with it. One
thread here, the supervisor, starts the process, reads its answers (done, moved, answer,
flushed, state, log) and calls ``done`` and ``moved`` from there, as the Writer calls them
from its thread, and answers each job's ticket; so ``strict`` still answers a client only
once the writer process has committed.

A writer process that dies (killed, out of memory) is noticed when its end of the channel
closes: the supervisor logs it, reports every exchange it had not answered for as not
stored (a ``strict`` client gets its error; one the process committed just before dying
is counted as lost though it is in the database), sets /health's store problem until a
new process commits, and starts a new process, at most one a second. Restarting, rather
than stopping the proxy, keeps recording going after a one-off death (a huge body that
ran it out of memory); what arrives in between is given up on at once, never waited
for. A stop (SIGTERM) drains: the process writes everything sent, answers, and exits.

Linux only (SOCK_SEQPACKET, PR_SET_PDEATHSIG): elsewhere the store keeps its writer thread.

A job crosses as it is, and is done by the process's Writer as a thread Writer does it; its
answer (or what it raised) comes back pickled, and a Ctrl-C of the caller's is sent after it
(``cancel``: an import rolls back). An import whose exchanges cannot be pickled (a generator
reading a file) is refused: import through a store whose writer is a thread (every command
but the proxy opens one).
"""

import itertools
import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import freezeframe
from freezeframe.storage.errors import StoreClosed, StoreError, StoreUnavailable
from freezeframe.storage.objects import Outbox
from freezeframe.storage.records import Miss, NewExchange
from freezeframe.storage.spool import SpooledBlob
from freezeframe.storage.sql.channel import Channel
from freezeframe.storage.sql.jobs import Ticket, Waiting
from freezeframe.storage.sql.writer import DriftNote, Moved
from freezeframe.storage.stats import WriterStats

log = logging.getLogger("freezeframe.storage")

START_WAIT_S = 60.0
"""How long opening the store waits for the first writer process to open it."""
RESTART_DELAY_S = 1.0
"""The least time between two starts of the writer process, so that one that cannot start
does not spin."""

_EXIT_WAIT_S = 5.0
_CHILD = "from freezeframe.storage.sql.writerchild import main; main()"
_PACKAGE_HOME = Path(freezeframe.__file__).parents[1]
"""Where the freezeframe package this module was imported through was found (a checkout,
the editable install's tree in its ``build/``, or site-packages): in a checkout this module's
own file is in ``storage/``, not under ``freezeframe/``."""


class WriterProcess:
    """Owns the writer process and the supervisor thread that talks to it."""

    def __init__(
        self,
        url: str,
        where: str,
        done: Callable[[NewExchange, bool], None],
        moved: Moved,
        objects: Outbox | None = None,
        reader: str | None = None,
        *,
        wait: bool = True,
    ) -> None:
        """Start the process; with ``wait``, return once it has opened the store, or raise
        StoreUnavailable with the reason it could not."""
        self._reader = reader
        """Open_store's ``reader``, which the process imports itself."""
        self._url = url
        self._objects = objects
        """The object store and its outbox (--blobs): the process opens its own."""
        self._where = where
        self._done = done
        self._moved = moved
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._pending: dict[int, NewExchange] = {}
        """Exchanges sent and not yet answered for, by token."""
        self._markers: dict[int, threading.Event] = {}
        self._jobs: dict[int, Ticket] = {}
        """Jobs sent and not yet answered, by token."""
        self._stats = WriterStats()
        """The running process's totals, as it last reported them."""
        self._earlier = WriterStats()
        """The totals of the processes that died before it."""
        self._failing: str | None = None
        self._died: str | None = None
        """Why the last process died, until its successor commits."""
        self._stopping = False
        self._wake = threading.Event()
        self._ready = threading.Event()
        """Set once the first process has opened the store, or has ended."""
        self._channel: Channel | None
        early = _adopt()
        if early is not None:  # started by start_early(): it has been importing meanwhile
            channel, started = early
            channel.send(self._opening())
            first: socket.socket | subprocess.Popen[bytes] = started
        else:
            channel, first = self._pair()
        self._channel = channel
        self._thread = threading.Thread(
            target=self._supervise, args=(channel, first), name="freezeframe-store-writer"
        )
        self._thread.daemon = True
        self._thread.start()
        # Ready before the proxy is: a first recording never waits for the process to start,
        # and one that cannot start stops the proxy's start with its reason.
        if wait and (not self._ready.wait(START_WAIT_S) or self._died is not None):
            why = self._died or f"it did not start within {START_WAIT_S:.0f}s"
            self.stop()
            raise StoreUnavailable(f"cannot start the writer process of store {where}: {why}")

    @property
    def failing(self) -> str | None:
        """Why the writer process cannot store; None while it stores. Read by
        Store.health()."""
        return self._died or self._failing

    def put(self, item: NewExchange | SpooledBlob | DriftNote | Miss | Ticket) -> None:
        """Send an exchange, a note, a job or a streamed body (then discarded here) to the
        process. Waits only while the process is QUEUE_LIMIT behind."""
        if isinstance(item, Ticket):
            self._send_job(item)
            return
        token = next(self._tokens)
        with self._lock:
            if self._stopping:
                if isinstance(item, SpooledBlob):
                    item.discard()
                raise StoreClosed(self._where)
            channel = self._channel
            if isinstance(item, NewExchange):
                self._pending[token] = item
        try:
            if channel is None:
                raise OSError("the writer process is restarting")
            if isinstance(item, NewExchange):
                channel.send(("exchange", token, item))
            elif isinstance(item, SpooledBlob):
                facts, fd = item.handed()
                channel.send(("blob", facts), fd)
            else:
                channel.send(("note", item))
        except OSError as exc:
            self._lost(token, item, exc)
        finally:
            if isinstance(item, SpooledBlob):
                item.discard()

    def flush(self, timeout: float | None) -> None:
        """Wait until everything sent so far is written (or, once stopping, until the
        process has exited)."""
        token = next(self._tokens)
        marker = threading.Event()
        with self._lock:
            stopping, channel = self._stopping, self._channel
            if not stopping and channel is not None:
                self._markers[token] = marker
        if stopping:
            self._thread.join(timeout)
            finished = not self._thread.is_alive()
        elif channel is None:
            finished = True  # restarting: what was sent before is as written as it will be
        else:
            try:
                channel.send(("flush", token))
            except OSError:
                marker.set()
            finished = marker.wait(timeout)
            with self._lock:
                self._markers.pop(token, None)
        if not finished:
            raise StoreError(f"store {self._where} did not finish writing within {timeout}s")

    def stats(self) -> WriterStats:
        """What the writer processes have done so far (their totals added up)."""
        with self._lock:
            return replace(_added(self._earlier, self._stats), queued=len(self._pending))

    def stop(self) -> None:
        """Write everything sent so far, then end the process. Safe to call twice."""
        with self._lock:
            first = not self._stopping
            self._stopping = True
            channel = self._channel
        if first:
            self._wake.set()
            if channel is not None:
                try:
                    channel.send(("stop",))
                except OSError:
                    channel.shutdown()
        self._thread.join()

    def _send_job(self, ticket: Ticket) -> None:
        """Send a job; its answer comes back on the channel (``answer``), and a caller's
        cancel after it."""
        token = next(self._tokens)
        with self._lock:
            if self._stopping:
                raise StoreClosed(self._where)
            channel = self._channel
            self._jobs[token] = ticket
        if isinstance(ticket, Waiting):
            ticket.on_cancel = lambda: self._cancel(token)
        try:
            if channel is None:
                raise OSError("the writer process is restarting")
            channel.send(("job", token, ticket.job))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self._unanswered(
                token,
                StoreError(
                    f"store {self._where} is written by a process of its own, and this "
                    f"{type(ticket.job).__name__.lower()} cannot be sent to it ({exc}); "
                    "import through a store opened by a command, not by the proxy"
                ),
            )
        except OSError as exc:
            self._unanswered(token, StoreError(f"cannot write to store {self._where}: {exc}"))

    def _cancel(self, token: int) -> None:
        with self._lock:
            channel = self._channel if token in self._jobs else None
        if channel is not None:
            try:
                channel.send(("cancel", token))
            except OSError:
                pass  # the process is gone: the job is answered as lost

    def _unanswered(self, token: int, error: StoreError) -> None:
        with self._lock:
            ticket = self._jobs.pop(token, None)
        if ticket is not None:
            ticket.answer(None, error)

    def _lost(
        self, token: int, item: NewExchange | SpooledBlob | DriftNote | Miss, exc: OSError
    ) -> None:
        """``item`` could not be sent: the process died or is being replaced."""
        with self._lock:
            exchange = self._pending.pop(token, None)
        what = "a drift note or miss"
        if isinstance(item, NewExchange):
            what = f"exchange {item.slot.seq} of cassette {item.cassette!r}"
        elif isinstance(item, SpooledBlob):
            what = f"body {item.ref.digest[:16]}"
        log.error("could not store %s in %s, dropping it: %s", what, self._where, exc)
        if exchange is not None:
            self._done(exchange, False)

    def _supervise(
        self, channel: Channel, first: "socket.socket | subprocess.Popen[bytes]"
    ) -> None:
        """Run the process (``first``: its end of the channel, or the process started
        early), and another each time one dies, until stopped."""
        while True:
            self._run(channel, first)
            with self._lock:
                if self._stopping:
                    return
            self._wake.wait(RESTART_DELAY_S)
            with self._lock:
                if self._stopping:
                    return
                channel, first = self._pair()
                self._channel = channel
            log.info("restarted the writer process of store %s", self._where)

    def _run(self, channel: Channel, first: "socket.socket | subprocess.Popen[bytes]") -> None:
        """Start one process (unless ``first`` is one already started), answer for what it
        says until it ends, then clean up."""
        started = time.monotonic()
        if isinstance(first, subprocess.Popen):
            process = first
        else:
            try:
                process = _start(first)
            except OSError as exc:
                self._ended(channel, f"the writer process could not start: {exc}")
                return
            finally:
                first.close()
        stopped = False
        while True:
            try:
                message, fd = channel.receive()
            except EOFError:
                break
            if fd is not None:
                os.close(fd)
            if message == ("stopped",):
                stopped = True
                break
            self._answer(message)
        try:
            code = process.wait(_EXIT_WAIT_S if stopped else None)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if stopped:
            channel.close()
            return
        lived = time.monotonic() - started
        self._ended(channel, f"the writer process exited (code {code}) after {lived:.1f}s")

    def _pair(self) -> tuple[Channel, socket.socket]:
        """A channel for a new process, its first message (which store to open) sent before
        anyone else can send on it: it waits in the socket until the process reads it."""
        channel, theirs = Channel.pair()
        channel.send(self._opening())
        return channel, theirs

    def _opening(self) -> tuple[str, str, str, int, tuple[str, str] | None, str | None]:
        """A process's first message: which store to open, the proxy's log level, the
        object store and outbox bodies go to (None: the database), and the reader."""
        level = logging.getLogger("freezeframe").getEffectiveLevel()
        objects = (
            None if self._objects is None else (self._objects.url, str(self._objects.directory))
        )
        return ("open", self._url, self._where, level, objects, self._reader)

    def _ended(self, channel: Channel, why: str) -> None:
        """The process is gone without being stopped: say so, and give up on what it had."""
        channel.close()
        with self._lock:
            if self._channel is channel:
                self._channel = None
            lost, self._pending = list(self._pending.values()), {}
            markers, self._markers = list(self._markers.values()), {}
            tickets, self._jobs = list(self._jobs.values()), {}
            self._earlier = _added(self._earlier, self._stats)
            self._stats = WriterStats()
            stopping = self._stopping
            if not stopping:
                self._died = why
        if not stopping:
            log.error(
                "%s; %d exchanges it had not stored are lost (store %s)",
                why,
                len(lost),
                self._where,
            )
        for exchange in lost:
            self._done(exchange, False)
        for marker in markers:
            marker.set()
        for ticket in tickets:
            ticket.answer(None, StoreError(f"store {self._where}: {why}"))
        self._ready.set()

    def _answer(self, message: object) -> None:
        """Act on one message from the process."""
        if not isinstance(message, tuple) or not message:
            log.error("the writer process of %s said %r", self._where, message)
            return
        kind = message[0]
        if kind == "ready":
            self._ready.set()
        elif kind == "done":
            _, token, ok = message
            with self._lock:
                exchange = self._pending.pop(token, None)
                if ok:
                    self._died = None
            if exchange is not None:
                self._done(exchange, ok)
        elif kind == "moved":
            _, token, slot = message
            with self._lock:
                exchange = self._pending.get(token)
            if exchange is not None:
                self._moved(exchange, slot)
        elif kind == "answer":
            _, token, result, error = message
            with self._lock:
                ticket = self._jobs.pop(token, None)
            if ticket is not None:
                ticket.answer(result, error)
        elif kind == "flushed":
            with self._lock:
                marker = self._markers.pop(message[1], None)
            if marker is not None:
                marker.set()
        elif kind == "state":
            _, stats, failing = message
            with self._lock:
                self._stats, self._failing = stats, failing
        elif kind == "log":
            _, name, level, text = message
            logging.getLogger(name).log(level, "%s", text)


_early: "tuple[Channel, subprocess.Popen[bytes]] | None" = None


def start_early() -> None:
    """Start the first writer process now, before the proxy's own imports: it spends about
    half a second importing the store, which then overlaps the proxy's instead of following
    it, and the store opened next (SqlStore.open with ``writer_process``) adopts it. The
    process waits for its first message to know which store to open; one never adopted ends
    with this process (its channel closes). The calling thread must live as long as the
    proxy (the main thread): the process is killed when it ends (PR_SET_PDEATHSIG)."""
    global _early
    if sys.platform != "linux" or _early is not None:
        return
    channel, theirs = Channel.pair()
    try:
        _early = (channel, _start(theirs))
    except OSError:
        channel.close()  # the store's own start tries again, and says why it cannot
    finally:
        theirs.close()


def forget_early() -> None:
    """End the process start_early() started if no store adopted it (the proxy did not get
    as far as opening its store): its channel closes, so it exits, and is waited for."""
    early = _adopt()
    if early is None:
        return
    channel, process = early
    channel.close()
    try:
        process.wait(_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _adopt() -> "tuple[Channel, subprocess.Popen[bytes]] | None":
    """The process start_early() started, once: the first store to open takes it."""
    global _early
    early, _early = _early, None
    return early


def _start(theirs: socket.socket) -> "subprocess.Popen[bytes]":
    fd = theirs.fileno()
    # Found where this process found freezeframe (a checkout, say), or earlier on the path.
    run = f"import sys; sys.path.append({str(_PACKAGE_HOME)!r}); {_CHILD}"
    return subprocess.Popen(
        # -P: the proxy's current directory (an agent's project) is not on the path.
        [sys.executable, "-P", "-c", run, str(fd), str(os.getpid())],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
    )


def _added(a: WriterStats, b: WriterStats) -> WriterStats:
    """The totals of two processes, one after the other."""
    return WriterStats(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(a)})
