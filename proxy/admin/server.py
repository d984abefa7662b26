"""uvicorn, minus its signal handling: the proxy process owns SIGTERM and SIGINT."""

from __future__ import annotations

import contextlib
from collections.abc import Generator

import uvicorn
from starlette.types import ASGIApp

from freezeframe.proxy.admin.limits import (
    HEAD_BYTES,
    KEEP_ALIVE,
    MAX_CONNECTIONS,
    AdminProtocol,
    BodyLimit,
)
from freezeframe.proxy.settings import Address


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
                h11_max_incomplete_event_size=HEAD_BYTES,
                timeout_keep_alive=int(KEEP_ALIVE),
                limit_concurrency=MAX_CONNECTIONS,
            )
        )

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
