"""What one client of the admin port can hold: bytes, time and connections.

The admin port shares the proxy's process, event loop and descriptors. Before these limits
a ``POST /login`` was read whole before its CSRF and token checks (300 MB took the proxy
from 94 to 694 MB), a request head sent halfway was waited for forever, and 1,100 of them
at the common 1,024-descriptor limit left the proxy no descriptor to proxy with, then
logged about 239,000 "Too many open files" tracebacks. Now:

* a request body is capped per route before it is read (:class:`BodyLimit`): a declared
  ``Content-Length`` over the cap is answered 413 at once, a body that grows past it as it
  streams is cut off there, and one that stalls is answered 408;
* a request head must be complete within :data:`HEAD_TIMEOUT` of the connection (or of its
  first byte after an answer), and a head larger than :data:`HEAD_BYTES` is answered 400
  (uvicorn's ``h11_max_incomplete_event_size``); an idle kept-alive connection is closed
  after :data:`KEEP_ALIVE` (uvicorn's ``timeout_keep_alive``);
* at most :data:`MAX_CONNECTIONS` connections are open: no more is accepted until one
  ends (proxy.admin.server), so the rest wait in the kernel's listen queue, holding no
  descriptor of the process, and the proxy port keeps its own;
* each of these conditions is logged as one line, at most once a minute with a count
  (:class:`Notices`), never a traceback per connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import Counter

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from freezeframe.proxy.admin.access import LOGIN, LOGOUT

log = logging.getLogger("freezeframe.admin")

MAX_CONNECTIONS = 64
"""The case file's pages open a few connections each; a script, one. Far below the
1,024 descriptors a process commonly gets, of which the proxy needs two per exchange."""
HEAD_TIMEOUT = 10.0
"""Seconds a connection may take to send a whole request head."""
HEAD_BYTES = 32 * 1024
"""The largest request head: the case file's requests carry a few cookies, far less."""
KEEP_ALIVE = 5.0
"""Seconds an idle kept-alive connection stays open (uvicorn's default, said here)."""
BODY_IDLE_TIMEOUT = 30.0
"""Seconds a request body may go without a byte before it is answered 408."""
DEFAULT_BODY_BYTES = 64 * 1024
"""A JSON command (``/api/mode``, fork, reset) is a few hundred bytes."""
BODY_LIMITS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(re.escape(LOGIN) + "|" + re.escape(LOGOUT)), 8 * 1024),
    (re.compile(r"/api/cassettes/[^/]+/\d+/edit"), 64 * 1024 * 1024),
)
"""Per route (the path, matched whole): a sign-in form holds a token and a CSRF value; an
edit may carry a whole replacement answer body."""
NOTICE_EVERY = 60.0


class Notices:
    """One log line per condition, then at most one a minute saying how often it recurred:
    a flood of bad connections must not become a flood of log lines."""

    def __init__(self, every: float = NOTICE_EVERY) -> None:
        self._every = every
        self._last: dict[str, float] = {}
        self._since: Counter[str] = Counter()

    def warn(self, condition: str, message: str) -> None:
        now = time.monotonic()
        self._since[condition] += 1
        last = self._last.get(condition)
        if last is not None and now - last < self._every:
            return
        count = self._since.pop(condition)
        self._last[condition] = now
        again = f" ({count} times since the last notice)" if last is not None else ""
        log.warning("admin port: %s%s", message, again)


NOTICES = Notices()


def body_limit(path: str) -> int:
    for pattern, limit in BODY_LIMITS:
        if pattern.fullmatch(path):
            return limit
    return DEFAULT_BODY_BYTES


class BodyLimit:
    """Caps each request body at its route's limit (:data:`BODY_LIMITS`) before anything
    reads it, so no handler, form parser or check downstream holds more."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope["path"])
        too_large = f"request body over {limit} bytes for {scope['path']}"
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _refuse(send, 413, too_large)
            return
        received = 0
        ended = refused = started = False

        async def refuse(status: int, reason: str) -> Message:
            """Answer now, and tell the app its client is gone: it reads no more."""
            nonlocal refused
            if not started:
                await _refuse(send, status, reason)
            refused = True
            return {"type": "http.disconnect"}

        async def bounded() -> Message:
            nonlocal received, ended
            if refused:
                return {"type": "http.disconnect"}
            if ended:  # after the body: a disconnect, which may come at any time
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), BODY_IDLE_TIMEOUT)
            except TimeoutError:
                return await refuse(408, f"request body stalled for {BODY_IDLE_TIMEOUT:.0f} s")
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    return await refuse(413, too_large)
                ended = not message.get("more_body", False)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the app's answer to a client it was told is gone
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded, sending)
        except Exception:
            if not refused:
                raise  # what starlette says of a disconnect mid-body is not an error here


async def _refuse(send: Send, status: int, reason: str) -> None:
    """A short JSON error, and the connection closed: the rest of the body is never read."""
    NOTICES.warn(f"refused-{status}", f"answered {status}: {reason}")
    body = json.dumps({"error": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class AdminProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a request-head deadline: uvicorn arms no timer
    before a connection's first answer, so a client that sent half a head held its
    descriptor for good."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self._between_requests():
            self._await_head()
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self._head_timer is not None and not self._between_requests():
            self._head_timer.cancel()  # a whole head came: the request is the app's now
            self._head_timer = None

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _await_head(self) -> None:
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self._between_requests() and not self.transport.is_closing():
            NOTICES.warn(
                "slow-head",
                f"closed a connection that sent no whole request within {HEAD_TIMEOUT:.0f} s",
            )
            self.transport.close()
