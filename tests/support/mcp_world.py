"""A real MCP server (the ``mcp`` SDK's own ``MCPServer``) over local HTTPS, and an agent.

:class:`McpDesk` serves one tool, ``execute_sql(region, query)``, whose ``region`` its schema
marks with ``x-mcp-header: Region``: a 2026-07-28 client mirrors it into ``Mcp-Param-Region``
and the server refuses a call whose mirrored headers and body disagree (``HeaderMismatch``).
It runs the SDK's Streamable HTTP app under uvicorn, with a ``trustme`` certificate,
stateless (the 2026-07-28 revision) or with sessions (2025-11-25, for a client that does the
``initialize`` handshake). ``calls`` counts the tool's runs and ``requests`` what reached the
server (method and MCP headers), so a test can assert a replay reached neither.

:data:`AGENT` runs with ``python -c AGENT URL MODE REGION``: ``mcp.Client`` in ``auto`` mode
(the stateless revision) or ``legacy`` (the handshake), calling the tool once.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import trustme
import uvicorn
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from support.proxy import free_port

Region = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]


class McpDesk:
    def __init__(self, ca: trustme.CA, *, stateless: bool = True) -> None:
        self.calls: list[tuple[str, str]] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.port = free_port()
        self._folder = tempfile.TemporaryDirectory()
        pem = Path(self._folder.name) / "server.pem"
        ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(pem)
        )
        server = MCPServer("desk")

        @server.tool()
        def execute_sql(region: Region, query: str) -> str:
            """Run a SQL query in a region."""
            self.calls.append((region, query))
            return f"3 rows in {region} for {query}"

        app = server.streamable_http_app(stateless_http=stateless, json_response=stateless)

        async def seen(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                mcp = {
                    k.decode(): v.decode()
                    for k, v in scope["headers"]
                    if k.startswith(b"mcp") or k == b"last-event-id"
                }
                self.requests.append((scope["method"], mcp))
            await app(scope, receive, send)

        config = uvicorn.Config(
            seen,
            host="127.0.0.1",
            port=self.port,
            ssl_certfile=str(pem),
            ssl_keyfile=str(pem),
            log_level="warning",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/mcp"

    def start(self) -> McpDesk:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._folder.cleanup()


AGENT = r"""
import asyncio, sys
from mcp import Client

url, mode, region = sys.argv[1], sys.argv[2], sys.argv[3]

async def main():
    async with Client(url, mode=mode) as client:
        result = await client.call_tool("execute_sql", {"region": region, "query": "SELECT 1"})
        print(result.content[0].text)

asyncio.run(main())
"""
