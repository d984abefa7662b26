"""Plays a recorded upstream back over a real socket, bytes and connection end included.

Some recordings cannot be expressed as a finished response object: a stream whose
events arrived over seconds, a 429 whose body was cut off when the upstream closed the
connection, a stream reset mid-way. What the client saw in those cases was mitmproxy's
reaction to an upstream behaving that way. The faithful way to show it again is to have
something behave the same way, so replay routes such flows to this in-process loopback
server, which writes the recorded head and chunks at the recorded times (scaled by the
replay pace) and then ends the connection as the upstream did. mitmproxy relays it
exactly as it relayed the original. It listens on 127.0.0.1 only and is never an
upstream: no byte leaves the machine.

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

from mitmproxy import http
from mitmproxy.connection import Server
from mitmproxy.net.http.http1 import assemble_response

from freezeframe.addons import answers
from freezeframe.addons._flows import info_of
from freezeframe.addons.uploads import RequestBody
from freezeframe.addons.websocket import handshake_headers, is_websocket
from freezeframe.addons.wsreenact import Conversation
from freezeframe.storage import Chunk, Exchange, Header, Outcome, RecordedResponse, Store
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.reenact")

TOKEN_HEADER = "x-freezeframe-reenact"
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


def _unframed(response: RecordedResponse, headers: Sequence[Header]) -> bool:
    """Whether an answer recorded over HTTP/2 or HTTP/3 says nothing of where its body ends
    (no content-length, no chunked transfer coding): those versions frame it themselves."""
    if response.http_version.upper().startswith("HTTP/1"):
        return False
    return not any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in headers)


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

    def __init__(self, store: Store, redactor: Redactor) -> None:
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
        request.scheme = "http"  # unlike .host, this setter leaves the headers alone
        request.data.host = "127.0.0.1"
        request.data.port = self._port
        request.headers[TOKEN_HEADER] = token
        # A fresh server connection without the ``via`` of --upstream-proxy: the loopback
        # server is reached directly, never through (or by) an upstream proxy.
        flow.server_conn = Server(address=(request.data.host, self._port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                staged = await self._read_request(reader)
                if staged is None:
                    return
                if isinstance(staged, Conversation):
                    await staged.play(reader, writer)
                    return
                if isinstance(staged, http.Response):
                    if not await self._write_answer(writer, staged):
                        return
                elif not await self._write_response(writer, staged):
                    return
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,  # a malformed head or chunk size: mitmproxy never sends one
        ):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read_request(self, reader: asyncio.StreamReader) -> Answer | Conversation | None:
        """Read one request, its body piece by piece; what to answer it with."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        token = ""
        length = 0
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == TOKEN_HEADER.encode():
                token = value.strip().decode("ascii", "replace")
            elif name == b"content-length":
                length = int(value.strip() or 0)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        staged = self._staged.pop(token, None)
        if staged is None:
            log.error("re-enactment requested with an unknown token")
        upload = staged.body if isinstance(staged, _Upload) else None
        async for piece in _body(reader, None if chunked else length):
            if upload is not None:
                upload.feed(piece)
        if isinstance(staged, _Upload):
            staged.body.end()
            try:
                return staged.answer(staged.body)
            except Exception as exc:  # noqa: BLE001 - the client must get an answer
                log.exception("could not answer a streamed request")
                return answers.error(500, "freezeframe_internal_error", f"freezeframe: {exc}")
        return staged

    async def _write_answer(self, writer: asyncio.StreamWriter, response: http.Response) -> bool:
        """Write a finished response; return whether the connection stays open."""
        writer.write(assemble_response(response))
        await writer.drain()
        return "close" not in response.headers.get("connection", "").lower()

    async def _write_response(self, writer: asyncio.StreamWriter, staged: Staged) -> bool:
        """Write the recording on its schedule; return whether the connection stays open."""
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
            await asyncio.sleep(min(staged.exchange.duration or 0.0, MAX_SILENCE) * (pace or 1.0))
            return False

        head = [f"HTTP/1.1 {recorded.status} {recorded.reason}".encode("latin-1")]
        head += [name + b": " + value for name, value in staged.headers]
        chunked = any(
            name.lower() == b"transfer-encoding" and b"chunked" in value.lower()
            for name, value in staged.headers
        )
        if _unframed(recorded, staged.headers):
            # An HTTP/2 or HTTP/3 answer has no framing headers: its stream ended with
            # END_STREAM or RST_STREAM. Sent here as is, it would be read until close,
            # where a reset is a clean end and a complete stream never ends, so it goes
            # chunked. mitmproxy drops transfer-encoding towards an HTTP/2 client.
            head.append(b"transfer-encoding: chunked")
            chunked = True
        await until(recorded.first_byte_at)
        writer.write(b"\r\n".join(head) + b"\r\n\r\n")
        async for at, piece in self._pieces(recorded):
            await until(at)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            await writer.drain()
        await writer.drain()
        exchange = staged.exchange
        if exchange.outcome in (Outcome.COMPLETE, Outcome.CLIENT_CLOSED):
            if chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            return True
        await until(exchange.duration)
        if exchange.error and "reset" in exchange.error.lower():
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


async def _body(reader: asyncio.StreamReader, length: int | None) -> AsyncIterator[bytes]:
    """A request body as it arrives, in pieces of at most ``_PIECE`` bytes: ``length``
    bytes, or chunked transfer coding when ``length`` is None (trailers are skipped)."""
    if length is not None:
        while length > 0:
            piece = await reader.read(min(length, _PIECE))
            if not piece:
                raise asyncio.IncompleteReadError(b"", length)
            length -= len(piece)
            yield piece
        return
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return
        async for piece in _body(reader, size):
            yield piece
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("malformed chunk")


async def _once(body: bytes) -> AsyncIterator[bytes]:
    if body:
        yield body


async def _in_thread(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while (part := await loop.run_in_executor(None, next, parts, None)) is not None:
        yield part
