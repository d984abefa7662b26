"""The pipe between the proxy and its writer process: pickled messages over a Unix
SOCK_SEQPACKET socket pair.

A sequenced-packet socket keeps each frame whole and in order, and carries a file
descriptor (SCM_RIGHTS) with the frame it belongs to, so a spooled body's unnamed
temporary file (storage.spool) crosses as it is, ahead of the exchange that names it,
and is never given a name a killed process could leave behind. A message larger than a
frame is cut into frames; one sender's frames never interleave with another's.

The socket's send buffer (SEND_BUFFER) is the bound between the two processes: a sender
waits when it is full, and the writer process stops reading while its own queue is full
(storage.sql.writerchild QUEUE_LIMIT), so a writer that falls behind slows the proxy down
instead of growing its memory without end.
"""

import os
import pickle
import socket
import threading

FRAME = 65_536
"""Bytes of a message per frame: well under a Unix socket's default send buffer, which
bounds a SOCK_SEQPACKET frame."""

SEND_BUFFER = 4 * 1024 * 1024
"""Bytes a sender may have in flight before it waits (at most; the system may allow less):
room for a burst of recordings while the writer process is busy, so that the proxy's event
loop does not wait on it."""

_MORE = b"\x01"
_LAST = b"\x00"


class Channel:
    """One end of the pair. send() is thread-safe; receive() is for one thread."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()

    @classmethod
    def pair(cls) -> tuple["Channel", socket.socket]:
        """This process's end, and the socket to hand to the other process (inheritable)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for end in (ours, theirs):
            # The kernel caps it (net.core.wmem_max): asked for, not promised.
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        theirs.set_inheritable(True)
        return cls(ours), theirs

    def send(self, message: object, fd: int | None = None) -> None:
        """Send one message, with ``fd`` (a copy of it arrives) if given. Raises OSError
        when the other end is gone."""
        data = memoryview(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        with self._lock:
            fds = [] if fd is None else [fd]
            while True:
                chunk, data = data[:FRAME], data[FRAME:]
                flag = _MORE if data else _LAST
                if fds:
                    socket.send_fds(self._sock, [flag, chunk], fds)
                    fds = []
                else:
                    self._sock.sendmsg([flag, chunk])
                if not data:
                    return

    def receive(self) -> tuple[object, int | None]:
        """The next message, and the descriptor that came with it (the caller owns it).
        Raises EOFError once the other end is closed."""
        pieces: list[bytes] = []
        fd: int | None = None
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._sock, FRAME + 1, 1)
            except ConnectionResetError:
                raise EOFError from None
            for extra in fds[1:] if fd is None else fds:
                os.close(extra)
            if fds and fd is None:
                fd = fds[0]
            if not data:
                if fd is not None:
                    os.close(fd)
                raise EOFError
            pieces.append(data[1:])
            if data[:1] == _LAST:
                return pickle.loads(b"".join(pieces)), fd

    def close(self) -> None:
        """Close this end, from any thread: a sender blocked on it is woken first (and gets
        OSError), and one that comes later gets OSError, never another file's descriptor."""
        self.shutdown()
        with self._lock:
            self._sock.close()

    def shutdown(self) -> None:
        """Tell the other end nothing more comes (it reads EOF), from any thread."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
