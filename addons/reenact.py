"""Plays a recorded upstream back over a real socket, bytes and connection end included.

Some recordings cannot be expressed as a finished response object: a stream whose
events arrived over seconds, a 429 whose body was cut off when the upstream closed the
connection, a stream reset mid-way. What the client saw in those cases was mitmproxy's
reaction to an upstream behaving that way. The faithful way to show it again is to have
something behave the same way, so replay routes such flows to this in-process loopback
server, which writes the recorded head and chunks at the recorded times (scaled by the
replay pace) and then ends the connection as the upstream did. mitmproxy relays it
exactly as it relayed the original. It listens on 127.0.0.1 only and is never an
upstream: no byte leaves the machine. h11 reads the requests and frames the answers
(content length, chunk sizes, keep-alive); the head goes out as recorded (see ``_head``).

It is also where replay sends a request whose body is too large to hold (see
``addons.uploads.Upload``): such a flow is routed here from the ``requestheaders`` hook,
before its body arrives, so mitmproxy streams the body to this server, which reads it
piece by piece into a ``RequestBody`` (hashing it, never holding it) and only then asks
replay what to answer.

A WebSocket is re-enacted here too: the recorded ``101`` answers the upgrade, and then
``addons.wsreenact`` plays the upstream's side of the recorded conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

import h11
from mitmproxy import http
from mitmproxy.connection import Server

from freezeframe.addons import answers
from freezeframe.addons._flows import info_of
from freezeframe.addons.uploads import RequestBody
from freezeframe.addons.websocket import handshake_headers, is_websocket
from freezeframe.addons.wsreenact import Conversation
from freezeframe.storage import Chunk, Exchange, Header, Outcome, ReadStore, RecordedResponse
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.reenact")

TOKEN_HEADER = "x-freezeframe-reenact"
_TOKEN = TOKEN_HEADER.encode()  # h11 gives header names lower-cased
_MAX_HEAD = 256 * 1024
_PIECE = 1024 * 1024
#: The longest silence re-enacted for a client that gave up waiting.
MAX_SILENCE = 600.0


def is_stream(response: RecordedResponse) -> bool:
    """Whether the client could observe when the body's pieces arrived (SSE, chunked)."""
    for name, value in response.headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return True
        if lowered == b"content-type" and value.lower().startswith(b"text/event-stream"):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Staged:
    """A recording to play: ``response`` (as served) under ``headers``, its delays
    multiplied by ``pace``, the connection ended the way ``exchange`` ended. No response
    means none ever came: silence for the recorded duration, then the connection closes."""

    exchange: Exchange
    response: RecordedResponse | None
    headers: tuple[Header, ...]
    pace: float


#: What the re-enactor answers a routed upload with: a recording, or a finished response
#: (freezeframe's own error, say).
Answer = Staged | http.Response


@dataclass(frozen=True, slots=True)
class _Upload:
    body: RequestBody
    answer: Callable[[RequestBody], Answer]


class Reenactor:
    """A mitmproxy addon that owns the loopback server for the lifetime of the proxy."""

    def __init__(self, store: ReadStore, redactor: Redactor) -> None:
        self._store = store
        self._redactor = redactor
        self._staged: dict[str, Staged | _Upload | Conversation] = {}
        self._server: asyncio.Server | None = None
        self._port = 0

    async def running(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)
        self._port = self._server.sockets[0].getsockname()[1]

    async def done(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def route(
        self,
        flow: http.HTTPFlow,
        exchange: Exchange,
        response: RecordedResponse | None,
        headers: Sequence[Header],
        pace: float,
    ) -> None:
        """Send this flow to the loopback server, which will answer with ``response`` (the
        recording as served) under ``headers``, its delays multiplied by ``pace``, and end
        the connection the way ``exchange`` ended. A WebSocket's answer goes on with its
        recorded conversation (``addons.wsreenact``)."""
        if response is not None and is_websocket(response):
            info = info_of(flow)
            secrets = info.secrets if info else ()
            self._stage(
                flow,
                Conversation(
                    exchange,
                    response,
                    handshake_headers(headers, flow.request),
                    pace,
                    lambda data: self._redactor.body(data, secrets),
                ),
            )
            return
        self._stage(flow, Staged(exchange, response, tuple(headers), pace))

    def route_upload(
        self, flow: http.HTTPFlow, body: RequestBody, answer: Callable[[RequestBody], Answer]
    ) -> None:
        """Send this flow here before its body arrives (call from ``requestheaders``; this
        makes mitmproxy stream the body): the body is read into ``body`` as it comes, and
        once it has ended, ``answer(body)`` says what to write back."""
        self._stage(flow, _Upload(body, answer))
        flow.request.stream = True

    def _stage(self, flow: http.HTTPFlow, staged: Staged | _Upload | Conversation) -> None:
        token = secrets.token_hex(12)
        self._staged[token] = staged
        request = flow.request
        info = info_of(flow)
        if info is not None and info.called is None:  # what the client called is recorded
            info.called = (request.scheme, request.host, request.port)
        request.scheme = "http"  # unlike .host, this setter leaves the headers alone
        request.data.host = "127.0.0.1"
        request.data.port = self._port
        request.headers[TOKEN_HEADER] = token
        if "host" not in request.headers and not request.authority:
            request.headers["host"] = request.host  # HTTP/1.1 wants one; an HTTP/1.0 client may not
        # A fresh server connection without the ``via`` of --upstream-proxy: the loopback
        # server is reached directly, never through (or by) an upstream proxy.
        flow.server_conn = Server(address=(request.data.host, self._port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection from mitmproxy, one after another; h11
        reads and writes the HTTP/1 (framing, chunk sizes, keep-alive)."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        try:
            while True:
                staged = await self._read_request(conn, reader)
                if staged is None:
                    return
                if isinstance(staged, Conversation):
                    if conn.trailing_data[0]:
                        log.error("a WebSocket client spoke before its upgrade was answered")
                        return
                    await staged.play(reader, writer)
                    return
                if isinstance(staged, http.Response):
                    await self._write_answer(conn, writer, staged)
                elif not await self._write_response(conn, writer, staged):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except h11.LocalProtocolError as exc:
            log.error("a recording could not be written as HTTP/1: %s", exc)
        except (
            asyncio.LimitOverrunError,
            ConnectionError,
            h11.RemoteProtocolError,  # mitmproxy never sends a malformed request
        ):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> Answer | Conversation | None:
        """Read one request, its body piece by piece; what to answer it with (None: the
        connection has ended)."""
        event = await _next_event(conn, reader)
        if not isinstance(event, h11.Request):
            return None
        token = next(
            (value.decode("ascii", "replace") for name, value in event.headers if name == _TOKEN),
            "",
        )
        staged = self._staged.pop(token, None)
        if staged is None:
            log.error("re-enactment requested with an unknown token")
        upload = staged.body if isinstance(staged, _Upload) else None
        while not isinstance(event := await _next_event(conn, reader), h11.EndOfMessage):
            if isinstance(event, h11.Data) and upload is not None:
                upload.feed(bytes(event.data))
            elif isinstance(event, h11.ConnectionClosed):
                return None
        if isinstance(staged, _Upload):
            staged.body.end()
            try:
                return staged.answer(staged.body)
            except Exception as exc:  # noqa: BLE001 - the client must get an answer
                log.exception("could not answer a streamed request")
                return answers.error(500, "freezeframe_internal_error", f"freezeframe: {exc}")
        return staged

    async def _write_answer(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, response: http.Response
    ) -> None:
        """Write a finished response (h11 closes the cycle as its headers say)."""
        head = h11.Response(
            status_code=response.status_code,
            reason=response.reason.encode("latin-1"),
            headers=list(response.headers.fields),
        )
        writer.write(conn.send(head) or b"")
        if response.raw_content:
            writer.write(conn.send(h11.Data(data=response.raw_content)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()

    async def _write_response(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, staged: Staged
    ) -> bool:
        """Write the recording on its schedule; return whether it ended as a whole answer.

        Each recorded chunk goes out as one h11 ``Data`` event, so a chunked answer keeps
        its chunk boundaries.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        recorded, pace = staged.response, staged.pace

        async def until(at: float | None) -> None:
            if pace and at:
                delay = start + at * pace - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)

        if recorded is None:
            # A wait is the whole of what the client saw; it cannot be collapsed, so even at
            # instant pace it lasts as long as recorded.
            await asyncio.sleep(
                min(staged.exchange.recorded.duration or 0.0, MAX_SILENCE) * (pace or 1.0)
            )
            return False

        await until(recorded.first_byte_at)
        writer.write(_head(conn, recorded.status, recorded.reason, staged.headers))
        async for at, piece in self._pieces(recorded):
            await until(at)
            writer.write(conn.send(h11.Data(data=piece)) or b"")
            await writer.drain()
        await writer.drain()
        exchange = staged.exchange
        if exchange.recorded.outcome in (Outcome.COMPLETE, Outcome.CLIENT_CLOSED):
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
            return True
        await until(exchange.recorded.duration)
        if exchange.recorded.error and "reset" in exchange.recorded.error.lower():
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        return False

    async def _pieces(
        self, recorded: RecordedResponse
    ) -> AsyncIterator[tuple[float | None, bytes]]:
        """The body cut where the recorded chunks began, each piece with its arrival time,
        so a client's reads split the same way. A body kept in the store streams from it
        part by part (read on a worker thread), never whole."""
        if recorded.body_ref is None:
            parts: AsyncIterator[bytes] = _once(recorded.body)
        else:
            parts = _in_thread(self._store.read_blob(recorded.body_ref))
        chunks = recorded.chunks or (Chunk(0, 0.0),)
        index, offset, pending = 0, 0, b""
        async for part in parts:
            pending += part
            while index < len(chunks):
                end = chunks[index + 1].offset if index + 1 < len(chunks) else None
                if end is None or offset + len(pending) < end:
                    break
                cut = end - offset
                if cut > 0:
                    yield chunks[index].at or None, pending[:cut]
                pending, offset, index = pending[cut:], end, index + 1
            if index == len(chunks) - 1 and len(pending) >= _PIECE:
                yield chunks[index].at or None, pending  # the last chunk: no need to hold it
                offset += len(pending)
                pending = b""
        if pending:
            yield chunks[min(index, len(chunks) - 1)].at or None, pending


_BODILESS = frozenset({204, 304})


def _head(conn: h11.Connection, status: int, reason: str, headers: Sequence[Header]) -> bytes:
    """The head of a recorded answer, byte for byte as recorded, for h11 to frame its body.

    h11 is given the same head, so it frames the body the way the head says; its own
    rendering, which title-cases the framing headers and moves them last, is not sent: the
    client gets the upstream's head. An answer whose head says nothing of where its body
    ends (one recorded over HTTP/2 or HTTP/3, whose stream ended with END_STREAM or
    RST_STREAM, or an HTTP/1.0-style one read until close) goes chunked, where read until
    close a reset would look like a clean end; mitmproxy drops transfer-encoding towards
    an HTTP/2 client.
    """
    fields = list(headers)
    framed = any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in fields)
    if not framed and status not in _BODILESS:
        fields.append((b"transfer-encoding", b"chunked"))
    encoded = reason.encode("latin-1")
    conn.send(h11.Response(status_code=status, reason=encoded, headers=fields))
    lines = [
        b"HTTP/1.1 %d %s" % (status, encoded),
        *(name + b": " + value for name, value in fields),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    """h11's next event from the client, read from the socket in pieces of at most
    ``_PIECE`` bytes (so a body arrives as such pieces, never whole)."""
    while (event := conn.next_event()) is h11.NEED_DATA:
        conn.receive_data(await reader.read(_PIECE))
    return event


async def _once(body: bytes) -> AsyncIterator[bytes]:
    if body:
        yield body


async def _in_thread(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while (part := await loop.run_in_executor(None, next, parts, None)) is not None:
        yield part
