"""A real MCP server (the official ``mcp`` SDK's ``MCPServer``) over streamable HTTP, on a
loopback port, in a thread: the SSE answers, session ids and JSON-RPC ids on the wire are the
SDK's own, so traffic recorded against it is what an agent's MCP client really exchanges.

    with McpServer() as server:        # server.url == "http://127.0.0.1:<port>/mcp"
        ...

Plain ``http``: an MCP client reaches it through ``HTTP_PROXY``, as the README tells users to.
"""

from __future__ import annotations

import threading
import time
from typing import Self

import uvicorn
from mcp.server.mcpserver import MCPServer

from freezeframe.proxy.ports import unused_port

__all__ = ["McpServer"]

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


def _server() -> MCPServer:
    server = MCPServer("corpus")

    @server.tool()
    def lookup(q: str) -> str:
        """Look a word up in the corpus dictionary."""
        return f"{q}: a word the corpus knows ({len(q)} letters)"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


class McpServer:
    """The SDK's server under uvicorn on its own thread; ``stop`` waits for it to end."""

    def __init__(self) -> None:
        self.port = unused_port()
        app = _server().streamable_http_app()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"the MCP server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(STOP_TIMEOUT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
