"""The writer process: the store's Writer (storage.sql.writer) run apart from the proxy.

Committing, compressing, deltas and search indexing are Python work that held the GIL
the proxy's event loop needs; here they run in a process of their own, started by
storage.sql.writerprocess as ``python -c "...writerchild import main; main()" FD PID``
(fork and exec, never a bare fork of a process running threads and an event loop).

What comes over the channel (storage.sql.channel), in order:

* ``("open", url, where, level, objects, reader)``: first; the store to write (already
  created by the proxy), the proxy's log level, the object store and outbox bodies go to,
  and the dotted path of the reader of unread exchanges (open_store's ``reader``).
* ``("exchange", token, NewExchange)``, ``("note", DriftNote | Miss)``,
  ``("blob", SpoolFacts)`` with the spool file's descriptor, ``("flush", token)``,
  ``("job", token, Job)``: queued for the Writer as the proxy's thread writer queued them.
* ``("cancel", token)``: the proxy's caller stopped waiting for that job (an import rolls
  back).
* ``("stop",)``: write everything queued, answer ``("stopped",)`` and exit.

What goes back: ``("ready",)`` once the store is open, ``("done", token, ok)`` once an
exchange is committed or given up on (after ``("moved", token, Slot)`` if it took another
slot), ``("answer", token, result, error)`` once a job is done (``error``: what it raised,
or None), ``("flushed", token)``, ``("state", WriterStats, failing)`` when either changed, and
``("log", name, level, text)`` for every record the Writer logs, which the proxy logs as
its own.

The process ignores SIGINT and SIGTERM: the proxy decides when it stops, and drains it
first (a Ctrl-C reaches the whole process group). It dies with the proxy: SIGKILL on the
death of the proxy's thread that started it (PR_SET_PDEATHSIG), as the thread writer died
with the process; and if that signal never comes, the channel's end tells it to write
what it has and exit.
"""

import contextlib
import dataclasses
import importlib
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from freezeframe.storage.errors import StoreError
from freezeframe.storage.jobs import Job
from freezeframe.storage.objects import outbox_for
from freezeframe.storage.records import NewExchange, Slot
from freezeframe.storage.spool import SpooledBlob
from freezeframe.storage.sql.channel import Channel
from freezeframe.storage.sql.engine import connect
from freezeframe.storage.sql.jobs import Ticket
from freezeframe.storage.sql.writer import Writer
from freezeframe.storage.stats import WriterStats

QUEUE_LIMIT = 4096
"""Items the Writer may have queued before this process stops reading the channel, so the
proxy waits (storage.sql.channel) instead of both processes growing without end."""

_ROOM_WAIT_S = 0.005


def _import(reader: str) -> None:
    """The reader's module; the Writer says why at the first exchange if it cannot."""
    with contextlib.suppress(Exception):
        importlib.import_module(reader.partition(":")[0])


class _Flushed:
    """The proxy's flush marker: answered once the Writer reaches it."""

    def __init__(self, channel: Channel, token: int) -> None:
        self._channel = channel
        self._token = token

    def set(self) -> None:
        _send(self._channel, ("flushed", self._token))


class _Answered(Ticket):
    """The proxy's job: answered on the channel once the Writer has done it."""

    def __init__(self, channel: Channel, token: int, job: Job[object]) -> None:
        super().__init__(job)
        self._channel = channel
        self._token = token
        self.stopped = False
        """Set when the proxy's caller stopped waiting."""
        self.answered = False

    def cancelled(self) -> bool:
        return self.stopped

    def answer(self, result: object, error: BaseException | None) -> None:
        self.answered = True
        if error is not None:
            try:
                pickle.dumps(error)
            except Exception:  # what cannot cross is said in its one line
                error = StoreError(str(error))
        _send(self._channel, ("answer", self._token, result, error))


class _Forward(logging.Handler):
    """Sends every record to the proxy, formatted (with its traceback) here."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self._channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._channel.send(("log", record.name, record.levelno, self.format(record)))
        except Exception:
            self.handleError(record)


class _Served:
    """The Writer, fed from the channel, answering on it."""

    def __init__(
        self,
        channel: Channel,
        url: str,
        where: str,
        objects: tuple[str, str] | None,
        reader: str | None,
    ) -> None:
        self._channel = channel
        self._tokens: dict[int, int] = {}
        """The proxy's token of each exchange queued, by id() of the exchange."""
        self._jobs: dict[int, _Answered] = {}
        """The jobs queued, by the proxy's token, to cancel one."""
        self._reported: tuple[WriterStats, str | None] = (WriterStats(), None)
        self._writer: Writer | None = None
        self._outbox = None if objects is None else outbox_for(objects[0], Path(objects[1]))
        self._writer = Writer(
            connect(url, create=False),
            self._done,
            where,
            self._moved,
            served=self._report,
            objects=self._outbox,
            reader=reader,
        )

    def serve(self) -> None:
        """Queue what comes until told to stop or the proxy is gone, then write it all."""
        writer = self._writer
        assert writer is not None
        while True:
            try:
                message, fd = self._channel.receive()
            except EOFError:
                break
            if not isinstance(message, tuple):
                raise TypeError(f"the writer process got {type(message).__name__}, not a tuple")
            kind = message[0]
            if kind == "exchange":
                _, token, exchange = message
                self._tokens[id(exchange)] = token
                writer.put(exchange)
            elif kind == "note":
                writer.put(message[1])
            elif kind == "blob":
                writer.put(SpooledBlob.taken(message[1], fd))
            elif kind == "flush":
                writer.put(_Flushed(self._channel, message[1]))
            elif kind == "job":
                _, token, job = message
                ticket = _Answered(self._channel, token, job)
                self._jobs = {t: j for t, j in self._jobs.items() if not j.answered}
                self._jobs[token] = ticket
                writer.put(ticket)
            elif kind == "cancel":
                cancelled = self._jobs.get(message[1])
                if cancelled is not None:
                    cancelled.stopped = True
            elif kind == "stop":
                writer.stop()
                if self._outbox is not None:
                    self._outbox.close()
                _send(self._channel, ("stopped",))
                return
            while writer.stats().queued >= QUEUE_LIMIT:
                time.sleep(_ROOM_WAIT_S)
        writer.stop()

    def _done(self, exchange: NewExchange, ok: bool) -> None:
        # The totals first, so that whoever the answer wakes reads them counted, as from
        # the thread writer.
        self._report()
        _send(self._channel, ("done", self._tokens.pop(id(exchange)), ok))

    def _moved(self, exchange: NewExchange, stored: Slot) -> None:
        _send(self._channel, ("moved", self._tokens[id(exchange)], stored))

    def _report(self) -> None:
        """Tell the proxy what the Writer has done and why it fails, when that changed."""
        if self._writer is None:
            return
        state = (self._writer.stats(), self._writer.failing)
        if dataclasses.replace(state[0], queued=0) != self._reported[0] or (
            state[1] != self._reported[1]
        ):
            self._reported = (dataclasses.replace(state[0], queued=0), state[1])
            _send(self._channel, ("state", *state))


def _send(channel: Channel, message: tuple[object, ...]) -> None:
    """Answer the proxy; once it is gone there is no one to answer, and the Writer writes
    on regardless."""
    try:
        channel.send(message)
    except OSError:
        pass


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the proxy's thread that started this process ends (Linux), and exit
    now if the proxy is gone already."""
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(0)


def main() -> None:
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    channel = Channel(socket.socket(fileno=fd))
    try:
        opened, _ = channel.receive()
    except EOFError:  # started early, and the proxy stopped before it opened its store
        sys.exit(0)
    if not (isinstance(opened, tuple) and opened[0] == "open"):
        raise TypeError("the writer process was not told which store to open")
    _, url, where, level, objects, reader = opened
    logger = logging.getLogger("freezeframe")
    logger.setLevel(level)
    logger.addHandler(_Forward(channel))
    logger.propagate = False
    try:
        served = _Served(channel, url, where, objects, reader)
    except StoreError as exc:
        logger.error("the store's writer process cannot open %s: %s", where, exc)
        sys.exit(1)
    _send(channel, ("ready",))
    if reader is not None:
        # Imported now, beside serving the channel, so the first recording does not wait for
        # it and neither does the proxy's start (its /health asks for a flush).
        threading.Thread(target=_import, args=(reader,), daemon=True).start()
    served.serve()
