"""A local HTTPS server that speaks HTTP/2, to test the proxy's side towards an upstream.

:class:`support.upstream.Upstream` offers only ``http/1.1`` in ALPN, so everything the proxy
sends it is HTTP/1.1 whatever the client spoke. This server offers ``h2`` first and
``http/1.1`` second (and picks by its own preference, as real servers do), so the proxy
talks HTTP/2 to it exactly when the proxy offers ``h2``. It records, for every request it
received completely, the HTTP version the request arrived on, and counts accepted TCP
connections (on accept, before TLS), so a test can assert that replay opened none.

It is ``h2`` (4.x, sans-I/O) on an asyncio loop in a daemon thread (the
:class:`support.upstream._TlsServer` the WebSocket upstream runs on too), ``h11`` for
HTTP/1.1, and a ``trustme`` CA for TLS. Every endpoint is written once against a small
reply interface with an HTTP/2 and an HTTP/1.1 implementation, so both versions answer the
same bytes.

Quick use::

    ca = make_ca()
    with H2Upstream(ca) as up:                # up.base_url == "https://localhost:<port>"
        ...
    up.requests[-1].http_version              # "HTTP/2" or "HTTP/1.1"

Endpoints (``n`` = that endpoint's counter, from 1)
---------------------------------------------------
* ``GET|POST /json``: ``{"n": n, "http_version": ..., "echo": <json body or query>}``.
* ``GET /sse?events=N&gap_ms=M``: N SSE events M ms apart, each in its own DATA frame
  (its own chunk over HTTP/1.1).
* ``GET /reset?code=NAME``: 200, two body pieces, then the stream is reset: RST_STREAM with
  HTTP/2 error ``NAME`` (default ``INTERNAL_ERROR``), or a TCP RST over HTTP/1.1, which
  has no way to end one exchange but not the connection.
* anything else: 404 JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import struct
from typing import Any, Protocol
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h11
import trustme

from support.upstream import (
    IDLE_TIMEOUT,
    MAX_EVENTS_PER_REQUEST,
    MAX_GAP,
    MAX_REQUESTS_PER_CONNECTION,
    MAX_SSE_EVENTS,
    WRITE_TIMEOUT,
    SeenRequest,
    _compact,
    _int_param,
    _TlsServer,
)

__all__ = ["H2Upstream", "VersionedRequest"]

MAX_BODY = 1024 * 1024
READ_SIZE = 65536
MAX_READS_PER_CONNECTION = 1_000_000
HTTP2 = "HTTP/2"
HTTP11 = "HTTP/1.1"


@dataclasses.dataclass(frozen=True)
class VersionedRequest(SeenRequest):
    """One request the server received completely, and the HTTP version it came on."""

    http_version: str = HTTP11


class _Reply(Protocol):
    """How an endpoint answers, whatever the HTTP version. Header names are lower case."""

    version: str

    async def head(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    async def data(self, data: bytes) -> None: ...

    async def end(self) -> None: ...

    async def reset(self, code: h2.errors.ErrorCodes) -> None: ...


class _H2Connection:
    """One HTTP/2 connection's state: the ``h2`` machine, a task per stream being
    answered, and the writes those tasks make, within the peer's flow-control window."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.conn = h2.connection.H2Connection(config)
        self.writer = writer
        self.window = asyncio.Event()
        self.tasks: dict[int, asyncio.Task[None]] = {}

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)
            await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT)

    async def send_data(self, stream_id: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            size = min(
                self.conn.local_flow_control_window(stream_id),
                self.conn.max_outbound_frame_size,
                len(view),
            )
            if size <= 0:
                self.window.clear()
                await asyncio.wait_for(self.window.wait(), WRITE_TIMEOUT)
                continue
            self.conn.send_data(stream_id, view[:size].tobytes())
            view = view[size:]
            await self.flush()


@dataclasses.dataclass
class _H2Reply:
    connection: _H2Connection
    stream_id: int
    version: str = HTTP2

    async def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.connection.conn.send_headers(self.stream_id, [(":status", str(status)), *headers])
        await self.connection.flush()

    async def data(self, data: bytes) -> None:
        await self.connection.send_data(self.stream_id, data)

    async def end(self) -> None:
        self.connection.conn.end_stream(self.stream_id)
        await self.connection.flush()

    async def reset(self, code: h2.errors.ErrorCodes) -> None:
        self.connection.conn.reset_stream(self.stream_id, code)
        await self.connection.flush()


@dataclasses.dataclass
class _H1Reply:
    conn: h11.Connection
    writer: asyncio.StreamWriter
    version: str = HTTP11
    was_reset: bool = False

    async def _send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            self.writer.write(data)
            await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT)

    async def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        # Without a content-length, h11 frames the body with chunked transfer coding.
        await self._send(h11.Response(status_code=status, headers=headers))

    async def data(self, data: bytes) -> None:
        await self._send(h11.Data(data=data))

    async def end(self) -> None:
        await self._send(h11.EndOfMessage())

    async def reset(self, code: h2.errors.ErrorCodes) -> None:
        """HTTP/1.1 can only end the whole connection: with a TCP RST (SO_LINGER 0)."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()
        self.was_reset = True


class H2Upstream(_TlsServer):
    """The HTTP/2 test upstream. See the module docstring for the endpoints.

    ``reset_delay``: seconds between flushing the two pieces of ``/reset`` and the reset.
    """

    _name = "h2-upstream"
    _ends = (OSError, TimeoutError, h2.exceptions.ProtocolError, h11.ProtocolError)

    def __init__(
        self,
        ca: trustme.CA,
        *,
        host: str = "127.0.0.1",
        reset_delay: float = 0.05,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        super().__init__(ca, ["h2", "http/1.1"], host)
        self.reset_delay = min(max(0.0, reset_delay), MAX_GAP)
        self.idle_timeout = min(max(0.1, idle_timeout), 600.0)
        self.requests: list[VersionedRequest] = []
        self.counts: dict[str, int] = {}

    # -- public API --
    def url(self, path: str) -> str:
        return self.base_url + path

    # -- server plumbing --
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2":
            await self._serve_h2(reader, writer)
        else:
            await self._serve_h1(reader, writer)

    async def _serve_h2(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _H2Connection(writer)
        connection.conn.initiate_connection()
        await connection.flush()
        partial: dict[int, tuple[list[tuple[bytes, bytes]], bytearray]] = {}
        try:
            for _ in range(MAX_READS_PER_CONNECTION):
                data = await asyncio.wait_for(reader.read(READ_SIZE), self.idle_timeout)
                if not data:
                    return
                for event in connection.conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        partial[event.stream_id] = (list(event.headers or []), bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        stream_id = event.stream_id or 0
                        connection.conn.acknowledge_received_data(
                            event.flow_controlled_length or 0, stream_id
                        )
                        if stream_id not in partial:
                            continue  # refused as too large, below
                        partial[stream_id][1].extend(event.data or b"")
                        if len(partial[stream_id][1]) > MAX_BODY:
                            refused = h2.errors.ErrorCodes.REFUSED_STREAM
                            connection.conn.reset_stream(stream_id, refused)
                            partial.pop(stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        if event.stream_id in partial:
                            headers, body = partial.pop(event.stream_id)
                            self._start_h2_stream(connection, event.stream_id, headers, body)
                    elif isinstance(event, h2.events.StreamReset):
                        partial.pop(event.stream_id, None)
                        task = connection.tasks.pop(event.stream_id or 0, None)
                        if task is not None:
                            task.cancel()
                    elif isinstance(
                        event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)
                    ):
                        connection.window.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                await connection.flush()
        finally:
            for task in connection.tasks.values():
                task.cancel()

    def _start_h2_stream(
        self,
        connection: _H2Connection,
        stream_id: int,
        headers: list[tuple[bytes, bytes]],
        body: bytearray,
    ) -> None:
        pseudo = {name: value for name, value in headers if name.startswith(b":")}
        request = VersionedRequest(
            method=pseudo.get(b":method", b"").decode("ascii"),
            target=pseudo.get(b":path", b"/").decode("latin-1"),
            headers=[(name, value) for name, value in headers if not name.startswith(b":")],
            body=bytes(body),
            http_version=HTTP2,
        )
        self.requests.append(request)
        reply = _H2Reply(connection, stream_id)

        async def answer() -> None:
            try:
                await self._route(request, reply)
            except h2.exceptions.StreamClosedError:
                pass  # the client reset it first
            finally:
                connection.tasks.pop(stream_id, None)

        connection.tasks[stream_id] = asyncio.get_running_loop().create_task(answer())

    async def _serve_h1(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            request = await self._receive_h1(reader, conn)
            if request is None:
                return
            self.requests.append(request)
            reply = _H1Reply(conn, writer)
            await self._route(request, reply)
            if reply.was_reset:
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _receive_h1(
        self, reader: asyncio.StreamReader, conn: h11.Connection
    ) -> VersionedRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        for _ in range(MAX_EVENTS_PER_REQUEST):
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await asyncio.wait_for(reader.read(READ_SIZE), self.idle_timeout))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return None
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return VersionedRequest(
                    method=head.method.decode("ascii"),
                    target=head.target.decode("latin-1"),
                    headers=[(bytes(k), bytes(v)) for k, v in head.headers.raw_items()],
                    body=bytes(body),
                    http_version=HTTP11,
                )
            else:  # ConnectionClosed, PAUSED
                return None
        return None

    # -- endpoints --
    def _next(self, endpoint: str) -> int:
        n = self.counts.get(endpoint, 0) + 1
        self.counts[endpoint] = n
        return n

    async def _route(self, request: VersionedRequest, reply: _Reply) -> None:
        path, method = urlsplit(request.target).path, request.method
        if path == "/json" and method in ("GET", "POST"):
            await self._json(request, reply)
        elif path == "/sse" and method == "GET":
            await self._sse(request, reply)
        elif path == "/reset" and method == "GET":
            await self._reset(request, reply)
        else:
            error = {"message": f"no route for {method} {request.target}"}
            await self._send_json(reply, 404, {"error": error, "n": self._next("not_found")})

    @staticmethod
    async def _send_json(reply: _Reply, status: int, obj: Any) -> None:
        body = _compact(obj)
        headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
        await reply.head(status, headers)
        await reply.data(body)
        await reply.end()

    async def _json(self, request: VersionedRequest, reply: _Reply) -> None:
        echo: Any = request.query
        if request.method == "POST":
            try:
                echo = json.loads(request.body) if request.body else None
            except ValueError:
                echo = request.body.decode("utf-8", "replace")
        answer = {"n": self._next("json"), "http_version": reply.version, "echo": echo}
        await self._send_json(reply, 200, answer)

    async def _sse(self, request: VersionedRequest, reply: _Reply) -> None:
        n = self._next("sse")
        count = _int_param(request.query, "events", 5, 0, MAX_SSE_EVENTS)
        gap = _int_param(request.query, "gap_ms", 50, 0, int(MAX_GAP * 1000)) / 1000
        await reply.head(
            200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
        )
        for i in range(count):
            if i:
                await asyncio.sleep(gap)
            await reply.data(b"data: " + _compact({"i": i, "n": n}) + b"\n\n")
        await reply.end()

    async def _reset(self, request: VersionedRequest, reply: _Reply) -> None:
        n = self._next("reset")
        name = request.query.get("code", "INTERNAL_ERROR")
        try:
            code = h2.errors.ErrorCodes[name]
        except KeyError:
            await self._send_json(reply, 400, {"error": {"message": f"no error code {name}"}})
            return
        await reply.head(200, [("content-type", "text/plain; charset=utf-8")])
        await reply.data(f"piece 1 of reset n={n}\n".encode())
        await reply.data(f"piece 2 of reset n={n}\n".encode())
        await asyncio.sleep(self.reset_delay)
        await reply.reset(code)
