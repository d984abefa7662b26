"""An HTTPS upstream that breaks HTTP on purpose, writing raw bytes where h11 would refuse.

Each path is one way a real server goes wrong while an agent waits on it:

* ``/stall``: a streamed answer's headers and first event, then nothing, ever (until the
  client gives up, or a minute has passed);
* ``/bad-chunked``: chunked transfer coding whose second chunk size is not hexadecimal;
* ``/unclean-close``: a ``content-length`` of 1,000 and 100 bytes, then the TCP connection
  reset with no TLS ``close_notify``;
* ``/one-byte-chunks``: a 1 MB answer in chunked transfer coding, one byte per chunk
  (legal HTTP, and each chunk is an event in a proxy that streams).

It runs on its own event loop in a thread, like ``support.upstream.Upstream``, and serves
one request per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Awaitable, Callable

import trustme

STALL_LIMIT = 60.0
FIRST_EVENT = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
CUT_BODY = b"x" * 100
ONE_BYTE_CHUNKS = 1024 * 1024


class Misbehaving:
    def __init__(self, ca: trustme.CA) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(self._context)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0
        self.requests: list[str] = []

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}"

    def start(self) -> Misbehaving:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self.port = started.result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.transport.abort()
            return
        path = head.split(b" ", 2)[1].decode()
        self.requests.append(path)
        handlers: dict[str, Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]]
        handlers = {
            "/stall": self._stall,
            "/bad-chunked": self._bad_chunked,
            "/unclean-close": self._unclean_close,
            "/one-byte-chunks": self._one_byte_chunks,
        }
        handler = handlers.get(path)
        if handler is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        await handler(reader, writer)

    async def _stall(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + f"{len(FIRST_EVENT):x}\r\n".encode()
            + FIRST_EVENT
            + b"\r\n"
        )
        await writer.drain()
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(reader.read(), STALL_LIMIT)  # until the peer goes away
        writer.transport.abort()

    async def _bad_chunked(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            b'5\r\n{"a":\r\nzz\r\nnot a chunk\r\n0\r\n\r\n'
        )
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()

    async def _unclean_close(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n"
            b"content-length: 1000\r\n\r\n" + CUT_BODY
        )
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()  # RST, no close_notify

    async def _one_byte_chunks(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        block = b"1\r\nx\r\n" * 65536
        for _ in range(ONE_BYTE_CHUNKS // 65536):
            writer.write(block)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()
