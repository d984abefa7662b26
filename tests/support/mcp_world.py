"""A real MCP server (the ``mcp`` SDK's own ``MCPServer``) over local HTTPS, and an agent.

:class:`McpDesk` serves one tool, ``execute_sql(region, query)``, whose ``region`` its schema
marks with ``x-mcp-header: Region``: a 2026-07-28 client mirrors it into ``Mcp-Param-Region``
and the server refuses a call whose mirrored headers and body disagree (``HeaderMismatch``).
It runs the SDK's Streamable HTTP app under uvicorn, with a ``trustme`` certificate,
stateless (the 2026-07-28 revision) or with sessions (2025-11-25, for a client that does the
``initialize`` handshake). With ``resumable``, a 2025-11-25 server keeps its events in an
:class:`EventStore` and a second tool, ``slow_sql``, closes its SSE stream mid-call (the
SDK's ``close_sse_stream``): the client resumes with ``GET`` and ``Last-Event-ID`` after the
server's ``retry`` interval, and the server replays the events it missed, the result among
them. ``calls`` counts the tool's runs and ``requests`` what reached the
server (method and MCP headers), so a test can assert a replay reached neither.

:data:`AGENT` runs with ``python -c AGENT URL MODE REGION``: ``mcp.Client`` in ``auto`` mode
(the stateless revision) or ``legacy`` (the handshake), calling the tool once (``execute_sql``,
or the tool named by a fourth argument).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import trustme
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage
from pydantic import Field

from support.proxy import free_port

Region = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
RETRY_MS = 200
"""The ``retry`` a resumable server primes its streams with: how long a client waits before
it resumes."""


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, as the spec's resumption needs: an event id
    names its stream and its place, and a resumed stream gets what followed it."""

    def __init__(self) -> None:
        self.events: list[tuple[StreamId, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self.events.append((stream_id, message))
        return str(len(self.events))

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream, _ = self.events[int(last_event_id) - 1]
        for at, (other, message) in enumerate(
            self.events[int(last_event_id) :], int(last_event_id) + 1
        ):
            if other == stream and message is not None:
                await send_callback(EventMessage(message, str(at)))
        return stream


class McpDesk:
    def __init__(self, ca: trustme.CA, *, stateless: bool = True, resumable: bool = False) -> None:
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

        @server.tool()
        async def slow_sql(region: str, query: str, ctx: Context) -> str:
            """Run a long SQL query in a region; its stream closes before the rows come."""
            await ctx.close_sse_stream()
            self.calls.append((region, query))
            return f"3 rows in {region} for {query}, after a while"

        self.events = MemoryEventStore() if resumable else None
        app = server.streamable_http_app(
            stateless_http=stateless,
            json_response=stateless,
            event_store=self.events,
            retry_interval=RETRY_MS if resumable else None,
        )

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
tool = sys.argv[4] if len(sys.argv) > 4 else "execute_sql"

async def main():
    async with Client(url, mode=mode) as client:
        result = await client.call_tool(tool, {"region": region, "query": "SELECT 1"})
        print(result.content[0].text)

asyncio.run(main())
"""
