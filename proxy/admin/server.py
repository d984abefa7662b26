"""uvicorn, minus its signal handling: the proxy process owns SIGTERM and SIGINT."""

from __future__ import annotations

import contextlib
from collections.abc import Generator

import uvicorn
from starlette.types import ASGIApp

from freezeframe.proxy.settings import Address


class AdminServer(uvicorn.Server):
    def __init__(self, app: ASGIApp, address: Address) -> None:
        super().__init__(
            uvicorn.Config(
                app,
                host=address.host,
                port=address.port,
                log_level="warning",
                lifespan="off",
                access_log=False,
            )
        )

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
