"""Plays a recorded upstream back over a real socket, bytes and connection end included.

Some recordings cannot be expressed as a finished response object: a 429 whose body
was cut off when the upstream closed the connection, a stream reset mid-way. What the
client saw in those cases was mitmproxy's reaction to an upstream misbehaving. The
faithful way to show it again is to have something misbehave the same way, so replay
routes such flows to this in-process loopback server, which writes the recorded head
and body and then ends the connection as the upstream did. mitmproxy then relays it
exactly as it relayed the original. It listens on 127.0.0.1 only and is never an
upstream: no byte leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import struct

from mitmproxy import http

from storage import Exchange, Outcome

log = logging.getLogger("freezeframe.reenact")

TOKEN_HEADER = "x-freezeframe-reenact"
_MAX_HEAD = 256 * 1024


class Reenactor:
    """A mitmproxy addon that owns the loopback server for the lifetime of the proxy."""

    def __init__(self) -> None:
        self._staged: dict[str, Exchange] = {}
        self._server: asyncio.Server | None = None
        self._port = 0

    async def running(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)
        self._port = self._server.sockets[0].getsockname()[1]

    async def done(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def route(self, flow: http.HTTPFlow, exchange: Exchange) -> None:
        """Send this flow to the loopback server, which will answer with ``exchange``."""
        token = secrets.token_hex(12)
        self._staged[token] = exchange
        request = flow.request
        request.scheme = "http"  # unlike .host, this setter leaves the headers alone
        request.data.host = "127.0.0.1"
        request.data.port = self._port
        request.headers[TOKEN_HEADER] = token

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                exchange = await self._read_request(reader)
                if exchange is None:
                    return
                if not await self._write_response(writer, exchange):
                    return
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read_request(self, reader: asyncio.StreamReader) -> Exchange | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        token = ""
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == TOKEN_HEADER.encode():
                token = value.strip().decode("ascii", "replace")
            elif name == b"content-length":
                length = int(value.strip() or 0)
        if length:
            await reader.readexactly(length)
        exchange = self._staged.pop(token, None)
        if exchange is None:
            log.error("re-enactment requested with an unknown token")
        return exchange

    async def _write_response(self, writer: asyncio.StreamWriter, exchange: Exchange) -> bool:
        """Write the recording; return whether the connection stays open for another."""
        recorded = exchange.response
        assert recorded is not None
        head = [f"HTTP/1.1 {recorded.status} {recorded.reason}".encode("latin-1")]
        head += [name + b": " + value for name, value in recorded.headers]
        writer.write(b"\r\n".join(head) + b"\r\n\r\n")
        chunked = any(
            name.lower() == b"transfer-encoding" and b"chunked" in value.lower()
            for name, value in recorded.headers
        )
        for piece in _pieces(recorded.body, [c.offset for c in recorded.chunks]):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        await writer.drain()
        if exchange.outcome is Outcome.COMPLETE:
            if chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            return True
        if exchange.error and "reset" in exchange.error.lower():
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        return False


def _pieces(body: bytes, offsets: list[int]) -> list[bytes]:
    """Split the body where the recorded chunks began, so reads split the same way."""
    bounds = sorted({o for o in offsets if 0 < o < len(body)})
    starts = [0, *bounds]
    ends = [*bounds, len(body)]
    return [body[s:e] for s, e in zip(starts, ends, strict=True) if e > s]
