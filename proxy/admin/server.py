"""uvicorn, minus its signal handling (the proxy process owns SIGTERM and SIGINT), and
accepting no more connections than limits.MAX_CONNECTIONS."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Generator

import uvicorn
from starlette.types import ASGIApp

from freezeframe.proxy.admin.limits import (
    HEAD_BYTES,
    KEEP_ALIVE,
    MAX_CONNECTIONS,
    NOTICES,
    AdminProtocol,
    BodyLimit,
)
from freezeframe.proxy.settings import Address

AT_CAPACITY_POLL = 0.05
"""Seconds between looks at the connection count while it is at the cap."""
OUT_OF_DESCRIPTORS_PAUSE = 0.5
"""Seconds to wait after an accept failed (the process out of descriptors, say) before
the next: a failure repeats at most twice a second, and is logged once a minute."""


class AdminServer(uvicorn.Server):
    def __init__(
        self, app: ASGIApp, address: Address, trusted_proxies: tuple[str, ...] = ()
    ) -> None:
        # uvicorn believes X-Forwarded-For from 127.0.0.1 by default, which would let any
        # local client name a new address for each wrong token and never meet the login
        # limit (access.LoginAttempts): forwarding headers count only from a named proxy.
        super().__init__(
            # limits.py says what each bound is for. uvicorn's own warnings come once per
            # bad request (a flood's worth of lines): limits.NOTICES says them once a minute.
            uvicorn.Config(
                BodyLimit(app),
                host=address.host,
                port=address.port,
                log_level="error",
                lifespan="off",
                access_log=False,
                proxy_headers=bool(trusted_proxies),
                forwarded_allow_ips=list(trusted_proxies) or None,
                http=AdminProtocol,
                # No route of the admin API is a WebSocket: uvicorn would otherwise import a
                # WebSocket library at every start (the websockets package, about 8 ms of
                # CPU), and an upgrade request is answered as plain HTTP (#30).
                ws="none",
                h11_max_incomplete_event_size=HEAD_BYTES,
                timeout_keep_alive=int(KEEP_ALIVE),
            )
        )
        # Not uvicorn's limit_concurrency: it answers 503 to a request that has arrived, on
        # a connection that already holds its descriptor; _accept never takes one too many.
        self._accepting: list[asyncio.Task[None]] = []

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start with no listener of its own: asyncio's server accepts every
        connection waiting in the queue at once (2,048 of them with uvicorn's backlog), so a
        flood took every descriptor before any could be closed. ``accept`` takes them one at
        a time, and none while MAX_CONNECTIONS are open."""
        await super().startup(sockets=[])
        self._accepting = [asyncio.create_task(self._accept(sock)) for sock in sockets or []]

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        await super().shutdown(sockets=sockets)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        listener.setblocking(False)
        connections = self.server_state.connections
        while True:
            if len(connections) >= MAX_CONNECTIONS:
                NOTICES.warn(
                    "full",
                    f"{MAX_CONNECTIONS} connections are open, the most it takes; the next "
                    "wait until one ends",
                )
                while len(connections) >= MAX_CONNECTIONS:
                    await asyncio.sleep(AT_CAPACITY_POLL)
            try:
                accepted, _ = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue  # the client gave up between its connect and the accept
                NOTICES.warn("accept", f"cannot accept a connection: {exc.strerror or exc}")
                await asyncio.sleep(OUT_OF_DESCRIPTORS_PAUSE)  # e.g. out of descriptors
                continue
            await loop.connect_accepted_socket(self._protocol, accepted)

    def _protocol(self) -> AdminProtocol:
        return AdminProtocol(
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state
        )
