"""A local HTTPS server that speaks the OpenAI and Anthropic wire formats, byte for byte.

End-to-end tests record an agent's traffic through the proxy against an :class:`Upstream`,
stop it, and replay. The server therefore

* speaks realistic OpenAI Chat Completions and Anthropic Messages JSON and SSE, so the
  official SDKs parse its answers;
* gives answers that change on every call (each endpoint has its own counter ``n``, starting
  at 1, and every response body embeds it), so a replayed answer can be told from a live one;
* counts accepted TCP connections (on accept, before TLS) and fully received requests, so a
  test can assert that replay opened zero connections here.

It is a raw asyncio server (``loop.create_server``, the same machinery as
``asyncio.start_server``) on its own event loop in a daemon thread, parsing HTTP/1.1 with
``h11`` (keep-alive: many requests per connection). TLS comes from a ``trustme`` CA, with
ALPN offering ``http/1.1`` only. The TLS handshake is started by hand (``loop.start_tls``) so
that a connection is counted the moment it is accepted, even if its handshake then fails.

Quick use::

    from support.upstream import Upstream, make_ca, client_ssl_context

    ca = make_ca()
    with Upstream(ca) as up:             # up.base_url == "https://localhost:<port>"
        ...
    ca.cert_pem.write_to_path(str(path))  # the CA as PEM, for SSL_CERT_FILE & co.

Pointing each client at it directly (no proxy)
----------------------------------------------
openai (3.x, built on ``httpx2``)::

    ctx = client_ssl_context(ca)       # ssl.SSLContext trusting only the trustme CA
    openai.OpenAI(base_url=up.base_url + "/v1", api_key="sk-test",
                  http_client=openai.DefaultHttpxClient(verify=ctx))
    # or: SSL_CERT_FILE=<ca.pem> in the environment *before* the client is constructed.

anthropic (2.x, built on ``httpx2``)::

    anthropic.Anthropic(base_url=up.base_url, api_key="sk-ant-test",
                        http_client=anthropic.DefaultHttpxClient(verify=ctx))
    # or SSL_CERT_FILE=<ca.pem>, as for openai.

httpx: ``httpx.Client(verify=ctx)`` or ``SSL_CERT_FILE``.
requests: ``requests.get(url, verify="<ca.pem>")`` or ``REQUESTS_CA_BUNDLE=<ca.pem>``.

What the clients read from the environment (read from the installed sources)
---------------------------------------------------------------------------
CA bundle:

* openai / anthropic (httpx2 2.16 -> ``httpcore2._ssl.default_ssl_context``): ``SSL_CERT_FILE``,
  else ``SSL_CERT_DIR``, only when ``trust_env`` (the default), read when the client (its
  transport) is constructed. The file *replaces* the default store (``cafile=``), it is not
  added to it. ``REQUESTS_CA_BUNDLE`` is ignored. Without them on Linux: OpenSSL's built-in
  paths (not certifi; truststore is only used on macOS/Windows).
* httpx 0.28: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR`` (``trust_env``), else certifi.
* requests 2.34: ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, else certifi. It ignores
  ``SSL_CERT_FILE``. (``Session.merge_environment_settings``, per request.)
* This sandbox presets SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE
  to the system bundle: a test must override (``monkeypatch.setenv``) every one it relies on.

Proxy: every one of them uses ``urllib.request.getproxies()`` (lower-case ``https_proxy`` wins
over ``HTTPS_PROXY``; also ``http_proxy``/``all_proxy``) plus ``no_proxy``/``NO_PROXY``.
``localhost`` and ``127.0.0.1`` are NOT bypassed by default -- they go through the proxy unless
listed in ``NO_PROXY`` (``NO_PROXY=*`` turns proxies off entirely). An https target through an
``http://`` proxy URL is tunnelled with ``CONNECT host:port``; the target certificate is
verified against the same CA settings as above, so a MITM proxy's CA must be in SSL_CERT_FILE
(httpx2/httpx) or REQUESTS_CA_BUNDLE (requests). anthropic builds its own proxy mounts from the
same variables (``anthropic._utils._httpx.get_environment_proxies``); openai relies on
``httpx2.Client``'s own. Passing your own ``http_client`` keeps this env handling as long as
its ``trust_env`` is left True and no ``proxy=``/``transport=`` is given.
NO_PROXY entries are matched against the URL's host name, never resolved: ``NO_PROXY=127.0.0.1``
does not cover ``https://localhost:...``. An explicit ``verify=<ctx>`` wins over SSL_CERT_FILE.
``tests/support/test_upstream.py`` checks all of this against :class:`ConnectTunnel`.

Client quirks worth knowing
---------------------------
* anthropic 2.x sends the key as ``Authorization: Bearer <key>`` (not ``x-api-key``).
* openai/anthropic read a non-streamed body inside ``send()``, so the cut-off 429 of
  ``/v1/ratelimited`` is a *transport* error (``APIConnectionError``) that the SDK retries
  whatever ``x-should-retry`` says; use ``max_retries=0`` for a single attempt. The complete
  429 of ``/ratelimited/full`` is a ``RateLimitError`` and is not retried.
* ``/reset-midstream`` really sends a TCP RST; over TLS, Python's ssl module may report it as
  a ragged EOF, so httpx raises ``RemoteProtocolError`` there (``ReadError`` over plain TCP).

Endpoints (``n`` = that endpoint's counter)
-------------------------------------------
* ``POST /v1/chat/completions``: OpenAI chat completion, or SSE chunks with ``"stream": true``.
* ``POST /v1/messages``: Anthropic message, or its SSE event sequence with ``"stream": true``;
  ``?overload_after=K`` ends the stream after K text deltas with an ``overloaded_error`` event.
* Both model endpoints answer a request that offers client tools, and whose last message is
  the user's own words, with a call of each tool (only the first when chat's
  ``parallel_tool_calls`` is false): see :func:`tool_arguments` for the arguments, which a
  stream sends TOOL_ARGUMENT_PIECE characters at a time. Once the last message carries tool
  results (or offers no tools) they answer with text as before. Chat answers a run of an
  agent that ends by calling ``final_answer`` (smolagents) as such a model does: the user's
  words with a call of every other tool, and the tools' results, which that agent sends as
  the user's ``Observation:`` text, with ``final_answer`` called with them.
* ``GET|POST /tool/counter``: ``{"count": n, "echo": <json body or query>}``.
* ``DELETE /tool/records/<id>``: ``{"deleted": id, "remaining": k, "n": n}``; ``up.deleted``.
* ``/v1/ratelimited`` (any method): 429 whose body is cut at 40% then a clean close.
* ``/ratelimited/full`` (any method): the same 429, complete. Both take ``?retry_after=S``
  (default 0) and ``?retryable=1`` (no ``x-should-retry: false``, so SDKs retry).
* ``/misdirected`` (any method): 421 Misdirected Request, ``{"error": ..., "n": n}``, its
  head and body in one write, as most servers send a small answer (Node's ``fetch`` retries
  a 421 once, on a new connection, with the same body).
* ``GET /reset-midstream``: chunked 200, two chunks, then a TCP RST.
* ``GET /gzip``: gzip-encoded JSON.
* ``GET /encoded/<coding>``: JSON sent with ``Content-Encoding: <coding>`` (gzip, br, zstd,
  deflate or identity); the exact bytes are :func:`encoded_body`. ``POST`` answers so with
  its body echoed as text.
* ``GET /sse/slow?events=N&gap_ms=M``: N SSE events M ms apart.
* ``GET /sse/idle?seconds=S``: an event stream's headers, then nothing for S seconds.
* ``GET /bytes?size=N``: N deterministic bytes (see :func:`expected_bytes`).
* ``/hang?seconds=S`` (any method): no answer at all; the connection closes after S seconds.
* ``POST /mcp``: MCP over streamable HTTP; a JSON-RPC result echoing the request's ``id``,
  as an SSE event when ``Accept`` starts with ``text/event-stream``.
* ``POST /v1/traces/ingest``: ``{"n": n}``, where the Agents SDK exports its traces.
* ``POST /runs/multipart`` and ``/runs/batch``: 202 ``{"n": n}``, where LangSmith's client
  uploads its run trees (the upstream is its ``LANGSMITH_ENDPOINT``).
* ``GET /bytes/random?size=N&seed=S``: N pseudo-random bytes generated as they are sent
  (up to 16 GiB; see :func:`random_chunks`).
* ``PUT|POST /upload``: reads the request body as it arrives, hashing it and keeping none
  of it (any size up to 1 GiB, Content-Length or chunked), and answers
  ``{"blake3": <hex of the body>, "size": <bytes>, "n": n}``.
* anything else: 404 JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import http
import json
import logging
import random
import re
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

import blake3
import brotli
import h11
import trustme
import zstandard

__all__ = [
    "ENCODERS",
    "TOOL_ARGUMENT_PIECE",
    "ConnectTunnel",
    "SeenRequest",
    "Upstream",
    "client_ssl_context",
    "encoded_body",
    "expected_bytes",
    "random_chunks",
    "make_ca",
    "rate_limit_body",
    "server_ssl_context",
    "tool_arguments",
    "write_ca_pem",
]

log = logging.getLogger(__name__)

START_TIMEOUT = 5.0
STOP_TIMEOUT = 4.0  # the whole of stop() stays under 5 s
HANDSHAKE_TIMEOUT = 5.0
SSL_SHUTDOWN_TIMEOUT = 2.0
CLOSE_TIMEOUT = 3.0
WRITE_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
MAX_BODY = 64 * 1024 * 1024
MAX_EVENTS_PER_REQUEST = 100_000
MAX_REQUESTS_PER_CONNECTION = 10_000
MAX_GAP = 10.0
MAX_BYTES = 64 * 1024 * 1024
MAX_STREAMED_BYTES = 1024 * 1024 * 1024
MAX_RANDOM_BYTES = 16 * 1024 * 1024 * 1024
"""The most ``/bytes/random`` sends: generated as sent, so only time bounds it (10 GB runs)."""
MAX_SSE_EVENTS = 10_000
TOOL_ARGUMENT_PIECE = 4
RATE_LIMIT_BODY_SIZE = 300
RATE_LIMIT_SENT_FRACTION = 0.4


def make_ca() -> trustme.CA:
    """A fresh throwaway CA. Its PEM: ``ca.cert_pem.write_to_path(str(path))``."""
    return trustme.CA()


def write_ca_pem(ca: trustme.CA, path: str | Path) -> Path:
    """Write the CA certificate as PEM to ``path`` (for SSL_CERT_FILE, REQUESTS_CA_BUNDLE)."""
    ca.cert_pem.write_to_path(str(path))
    return Path(path)


def client_ssl_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client context that trusts only ``ca`` (pass as ``verify=`` to httpx/httpx2)."""
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


def server_ssl_context(ca: trustme.CA, alpn: Sequence[str]) -> ssl.SSLContext:
    """A server context with a certificate from ``ca`` for localhost, 127.0.0.1 and
    ``api.upstream.test`` (the name captured clients use: support.netns), offering the
    ``alpn`` protocols in that order."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1", "api.upstream.test").configure_cert(ctx)
    ctx.set_alpn_protocols(list(alpn))
    return ctx


def expected_bytes(size: int, n: int) -> bytes:
    """The body of ``GET /bytes?size=<size>`` when it is that endpoint's ``n``-th call.

    Byte ``i`` is ``i % 251``, except that the first 16 bytes are ``b"n=%014d" % n``.
    """
    head = b"n=%014d" % n
    body = bytearray(i % 251 for i in range(size))
    body[: min(16, size)] = head[: min(16, size)]
    return bytes(body)


#: What ``GET /encoded/<coding>`` compresses with, by Content-Encoding token. ``deflate``
#: is the zlib format, as RFC 9110 defines it (not a raw deflate stream).
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "br": brotli.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "deflate": zlib.compress,
    "identity": lambda data: data,
}


def encoded_body(coding: str, n: int) -> tuple[bytes, bytes]:
    """``(sent, meant)`` for the ``n``-th ``GET /encoded/<coding>``: the bytes on the wire,
    and the JSON they decode to."""
    meant = _compact({"coding": coding, "n": n, "text": " ".join(["compressible"] * 50)})
    return ENCODERS[coding](meant), meant


def rate_limit_body(n: int) -> bytes:
    """The full (``RATE_LIMIT_BODY_SIZE``-byte) JSON error body of the ``n``-th 429."""
    base = (
        f"Rate limit reached for requests {n} in organization org-test on requests per min "
        "(RPM): Limit 3, Used 3, Requested 1."
    )

    def render(message: str) -> bytes:
        err = {"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"}
        return (json.dumps({"error": err}, indent=2) + "\n").encode()

    filler = " Please try again in 20s. Visit https://platform.openai.com/account/rate-limits."
    room = max(0, RATE_LIMIT_BODY_SIZE - len(render(base)))
    return render(base + (filler * (1 + room // len(filler)))[:room])


@dataclasses.dataclass(frozen=True)
class SeenRequest:
    """One request the server received completely."""

    method: str
    target: str  # path + query, as sent
    headers: list[tuple[bytes, bytes]]  # as sent (original name casing)
    body: bytes  # b"" for /upload, whose body is hashed as it arrives, never kept
    upload: tuple[str, int] | None = None  # /upload only: (blake3 hex, size) of the body

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query, keep_blank_values=True))

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower().encode()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return None

    def json(self) -> Any:
        return json.loads(self.body)


class _LoopThread:
    """An asyncio event loop running in a daemon thread, with bounded start/stop, for a
    server that listens on ``port`` (opened by ``_open``) from ``start()`` to ``stop()``,
    or for the body of a ``with`` block."""

    _name = "loop-thread"

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors: list[dict[str, Any]] = []  # unexpected loop errors (for debugging)
        self.port = 0

    def start(self) -> Self:
        self.port = self._start_loop(self._open)
        return self

    def stop(self) -> None:
        """Close the listening socket and every open connection. Idempotent, <= 5 s."""
        self._stop_loop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _open(self) -> int:  # overridden
        """Start listening, on the loop; the port listened on."""
        raise NotImplementedError

    def _start_loop(self, opener: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is not None:
                raise RuntimeError(f"{self._name} already started")
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(self._on_loop_error)
            thread = threading.Thread(target=self._run, args=(loop,), name=self._name, daemon=True)
            self._loop, self._thread = loop, thread
            thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(opener(), loop).result(timeout=START_TIMEOUT)
        except BaseException:
            self._stop_loop()
            raise

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError)):
            log.debug("%s: %s", self._name, context.get("message"), exc_info=exc)
            return
        self.errors.append(context)
        log.warning("%s: %s", self._name, context.get("message"), exc_info=exc)

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor(timeout=1.0))
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    async def _shutdown(self) -> None:  # overridden
        return None

    def _stop_loop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if not loop.is_closed():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(timeout=STOP_TIMEOUT - 1.0)
            except Exception as exc:  # noqa: BLE001 - stop must not raise
                fut.cancel()
                log.warning("%s: shutdown did not finish cleanly: %r", self._name, exc)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=1.0)


class _StreamServer(_LoopThread):
    """A server of ``asyncio.start_server`` streams on ``host``, each connection handled by
    ``_handle`` in a task of its own. Stop aborts every connection in ``_writers`` (the
    accepted ones are put there), cancels the handlers and waits, bounded, for them."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__()
        self.host = host
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()

    async def _open(self) -> int:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._writers.add(writer)
        self._handlers.add(task)
        try:
            await self._handle(reader, writer)
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError  # overridden

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=1.5)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._writers.clear()


class _TlsServer(_StreamServer):
    """A :class:`_StreamServer` for ``https://localhost:<port>``: it counts every connection
    on accept (``connections``: before TLS, so one whose handshake fails counts too), starts
    TLS with a certificate from ``ca`` offering ``alpn``, and serves it with ``_serve``. An
    exception in ``_ends`` aborts the connection quietly; else it is closed at the end."""

    _ends: tuple[type[BaseException], ...] = (OSError, TimeoutError)  # SSLError is an OSError

    def __init__(self, ca: trustme.CA, alpn: Sequence[str], host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.connections = 0
        self._ssl = server_ssl_context(ca, alpn)

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1  # on accept, before TLS
        try:
            await asyncio.wait_for(
                writer.start_tls(self._ssl, ssl_handshake_timeout=HANDSHAKE_TIMEOUT),
                HANDSHAKE_TIMEOUT + 1.0,
            )
            await self._serve(reader, writer)
        except self._ends:
            writer.transport.abort()
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError  # overridden


class _Wire(asyncio.Protocol):
    """One accepted TCP connection (TLS is layered on with ``loop.start_tls``)."""

    def __init__(self, owner: Upstream) -> None:
        self._owner = owner
        self.raw: asyncio.Transport | None = None
        self.transport: asyncio.Transport | None = None  # TLS transport, or raw
        self.task: asyncio.Task[None] | None = None
        self._buf = bytearray()
        self._eof = False
        self.lost = asyncio.Event()
        self._readable = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()

    # -- protocol callbacks --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.raw is not None:  # not expected: start_tls does not call it again
            return
        assert isinstance(transport, asyncio.Transport)
        self.raw = transport
        transport.pause_reading()  # nothing is read until TLS (or plain HTTP) is set up
        self._owner._accepted(self)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        self._readable.set()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._readable.set()
        # Plain TCP: stay half-open so we may still answer; TLS ignores the return value.
        return None if self._owner.tls else True

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._readable.set()
        self._can_write.set()
        self.lost.set()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- used by the handler task --
    @property
    def closing(self) -> bool:
        tr = self.transport or self.raw
        return self.lost.is_set() or tr is None or tr.is_closing()

    async def read(self, timeout: float) -> bytes:
        """Whatever has arrived (waiting up to ``timeout``), or b"" at end of stream."""
        if not self._buf and not self._eof:
            self._readable.clear()
            await asyncio.wait_for(self._readable.wait(), timeout)
        data = bytes(self._buf)
        self._buf.clear()
        return data

    async def write(self, data: bytes) -> None:
        if self.closing or self.transport is None:
            raise ConnectionResetError("connection is closed")
        self.transport.write(data)
        if not self._can_write.is_set():
            await asyncio.wait_for(self._can_write.wait(), WRITE_TIMEOUT)
        if self.lost.is_set():
            raise ConnectionResetError("connection lost while writing")

    async def flushed(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until every byte written has been handed to the kernel."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.lost.is_set():
            pending = sum(
                tr.get_write_buffer_size()
                for tr in {self.transport, self.raw}
                if tr is not None and not tr.is_closing()
            )
            if pending == 0:
                return
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        """Orderly close: flush, TLS close_notify, FIN. Bounded; aborts if it hangs."""
        tr = self.transport or self.raw
        if tr is not None and not tr.is_closing():
            tr.close()
        try:
            await asyncio.wait_for(self.lost.wait(), CLOSE_TIMEOUT)
        except TimeoutError:
            self.abort()

    def reset(self) -> None:
        """Close with a TCP RST (SO_LINGER 0) instead of a FIN."""
        if self.raw is not None:
            sock = self.raw.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.abort()

    def abort(self) -> None:
        for tr in (self.transport, self.raw):
            if tr is not None:
                tr.abort()


MODEL_COSTS = {
    "gpt-4o-mini": {
        "litellm_provider": "openai",
        "mode": "chat",
        "max_input_tokens": 128000,
        "max_output_tokens": 16384,
        "input_cost_per_token": 1.5e-07,
        "output_cost_per_token": 6e-07,
        "supports_function_calling": True,
    }
}
"""LiteLLM's model-cost map as its own fetch reads it (one model of the thousands it lists)."""


def _words(text: str) -> list[str]:
    """Split into word pieces that join back to ``text`` ("a b" -> ["a ", "b"])."""
    return re.findall(r"\s*\S+\s*", text) or [text]


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _text_of(content: Any) -> str:
    """Text of an OpenAI/Anthropic message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def tool_arguments(schema: Any, text: str) -> dict[str, str]:
    """The arguments the upstream calls a tool with: the user's last words as the value of
    the schema's first required property (else its first property); ``{}`` when it has none."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return {}
    required = [name for name in schema.get("required") or [] if name in properties]
    return {(required or list(properties))[0]: text}


def _pieces(text: str, size: int = TOOL_ARGUMENT_PIECE) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


FINAL_ANSWER = "final_answer"
"""The tool a smolagents run ends with: its argument is the run's answer."""
OBSERVATION = "Observation:"
"""How smolagents opens the tools' results, sent back as the user's text."""


def _asks_for_tools(messages: Any, tools: Any) -> bool:
    """Tools are offered and the last message is the user's own words, not tool results."""
    if not tools or not isinstance(messages, list) or not messages:
        return False
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    content = last.get("content")
    return not (
        isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _int_param(query: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(query.get(name, default))
    except ValueError:
        value = default
    return max(lo, min(hi, value))


class _BadRequest(Exception):
    pass


class Upstream(_LoopThread):
    """The fake provider. See the module docstring for the endpoints.

    ``stream_gaps``: seconds to wait between consecutive SSE events of the chat/messages
    streams; gap ``i`` follows event ``i``; the last value repeats (default: 5 ms each).
    ``reset_delay``: seconds between flushing the two chunks of /reset-midstream and the RST.
    ``id_salt``: put in every id the model would mint (``chatcmpl-``, ``call_``, ``msg_``,
    ``toolu_``), so that two faithful runs can differ only in those ids, as live runs do.
    """

    _name = "upstream"

    def __init__(
        self,
        ca: trustme.CA,
        *,
        host: str = "127.0.0.1",
        tls: bool = True,
        stream_gaps: Sequence[float] = (0.005,),
        reset_delay: float = 0.05,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        super().__init__()
        if any(not 0 <= g <= MAX_GAP for g in stream_gaps):
            raise ValueError(f"stream gaps must be within [0, {MAX_GAP}] s")
        self.ca = ca
        self.id_salt = ""
        self.host = host
        self.tls = tls
        self.stream_gaps = tuple(float(g) for g in stream_gaps)
        self.reset_delay = min(max(0.0, reset_delay), MAX_GAP)
        self.idle_timeout = min(max(0.1, idle_timeout), 600.0)
        self.connections = 0
        self.requests: list[SeenRequest] = []
        self.deleted: list[str] = []
        self.counts: dict[str, int] = {}
        self._server: asyncio.Server | None = None
        self._wires: set[_Wire] = set()
        self._server_ctx = server_ssl_context(ca, ["http/1.1"]) if tls else None

    # -- public API --
    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://localhost:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def reset_counters(self, *, endpoints: bool = False) -> None:
        """Forget connections, requests and deletions. Endpoint counters (the ``n`` in the
        answers) keep going unless ``endpoints=True``, so live answers after a reset still
        differ from the recorded ones."""
        self.connections = 0
        self.requests.clear()
        self.deleted.clear()
        if endpoints:
            self.counts.clear()

    # -- server plumbing --
    async def _open(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Wire(self), self.host, 0)
        return int(self._server.sockets[0].getsockname()[1])

    def _accepted(self, wire: _Wire) -> None:
        self.connections += 1  # on accept, before TLS
        self._wires.add(wire)
        wire.task = asyncio.get_running_loop().create_task(self._serve(wire))

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        wires = list(self._wires)
        for wire in wires:
            wire.abort()
            if wire.task is not None:
                wire.task.cancel()
        waits = [asyncio.ensure_future(w.lost.wait()) for w in wires if w.raw is not None]
        tasks = [w.task for w in wires if w.task is not None]
        if waits or tasks:
            await asyncio.wait([*waits, *tasks], timeout=1.5)
        for fut in waits:
            fut.cancel()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._wires.clear()

    async def _serve(self, wire: _Wire) -> None:
        loop = asyncio.get_running_loop()
        try:
            assert wire.raw is not None
            if self._server_ctx is not None:
                try:
                    wire.transport = await asyncio.wait_for(
                        loop.start_tls(
                            wire.raw,
                            wire,
                            self._server_ctx,
                            server_side=True,
                            ssl_handshake_timeout=HANDSHAKE_TIMEOUT,
                            ssl_shutdown_timeout=SSL_SHUTDOWN_TIMEOUT,
                        ),
                        HANDSHAKE_TIMEOUT + 1.0,
                    )
                except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                    log.debug("upstream: TLS handshake failed: %r", exc)
                    wire.abort()
                    return
            else:
                wire.transport = wire.raw
                wire.raw.resume_reading()
            if await self._http(wire):
                await wire.close()
        except (ConnectionError, TimeoutError) as exc:
            log.debug("upstream: connection ended: %r", exc)
            wire.abort()
        except asyncio.CancelledError:
            wire.abort()
            raise
        except Exception as exc:
            log.exception("upstream: handler crashed")
            self.errors.append({"message": "handler crashed", "exception": exc})
            wire.abort()
        finally:
            self._wires.discard(wire)

    async def _http(self, wire: _Wire) -> bool:
        """Serve requests until the connection should end. True: close it gracefully."""
        conn = h11.Connection(h11.SERVER)
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            req = await self._receive(wire, conn)
            if req is None:
                return True
            self.requests.append(req)
            if not await self._dispatch(wire, conn, req):
                return False  # the handler closed or reset the connection itself
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
            else:
                return True
        return True

    async def _receive(self, wire: _Wire, conn: h11.Connection) -> SeenRequest | None:
        method = target = ""
        headers: list[tuple[bytes, bytes]] = []
        body = bytearray()
        upload: blake3.blake3 | None = None  # /upload: the body is hashed, not kept
        size = 0
        for _ in range(MAX_EVENTS_PER_REQUEST):
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send_json(
                        wire, conn, exc.error_status_hint, {"error": {"message": str(exc)}}
                    )
                return None
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    await self._send(wire, conn, h11.InformationalResponse(status_code=100))
                try:
                    data = await wire.read(self.idle_timeout)
                except TimeoutError:
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                method = event.method.decode("ascii")
                target = event.target.decode("latin-1")
                headers = [(bytes(k), bytes(v)) for k, v in event.headers.raw_items()]
                if urlsplit(target).path == "/upload" and method in ("PUT", "POST"):
                    upload = blake3.blake3()
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if upload is not None:
                    upload.update(event.data)
                else:
                    body += event.data
                if size > (MAX_STREAMED_BYTES if upload is not None else MAX_BODY):
                    await self._send_json(wire, conn, 413, {"error": {"message": "too large"}})
                    return None
            elif isinstance(event, h11.EndOfMessage):
                digest = (upload.hexdigest(), size) if upload is not None else None
                return SeenRequest(method, target, headers, bytes(body), digest)
            else:  # ConnectionClosed, PAUSED
                return None
        return None

    # -- response helpers --
    async def _send(self, wire: _Wire, conn: h11.Connection, *events: h11.Event) -> None:
        data = b"".join(conn.send(event) or b"" for event in events)
        if data:
            await wire.write(data)

    @staticmethod
    def _head(
        status: int,
        content_type: str,
        extra: Iterable[tuple[str, str]] = (),
        *,
        length: int | None = None,
    ) -> h11.Response:
        headers = [("date", formatdate(usegmt=True)), ("content-type", content_type)]
        if length is None:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(length)))
        headers.extend(extra)
        reason = http.HTTPStatus(status).phrase.encode()
        return h11.Response(status_code=status, headers=headers, reason=reason)

    async def _send_full(
        self,
        wire: _Wire,
        conn: h11.Connection,
        status: int,
        content_type: str,
        body: bytes,
        extra: Iterable[tuple[str, str]] = (),
    ) -> bool:
        head = self._head(status, content_type, extra, length=len(body))
        await self._send(wire, conn, head, h11.Data(data=body), h11.EndOfMessage())
        return True

    async def _send_json(
        self,
        wire: _Wire,
        conn: h11.Connection,
        status: int,
        obj: Any,
        extra: Iterable[tuple[str, str]] = (),
        *,
        pretty: bool = False,
    ) -> bool:
        body = (json.dumps(obj, indent=2) + "\n").encode() if pretty else _compact(obj)
        return await self._send_full(wire, conn, status, "application/json", body, extra)

    async def _send_stream(
        self,
        wire: _Wire,
        conn: h11.Connection,
        frames: Sequence[bytes],
        extra: Iterable[tuple[str, str]] = (),
        *,
        gap: Callable[[int], float],
        content_type: str = "text/event-stream",
    ) -> bool:
        """200, chunked; each frame its own HTTP chunk, ``gap(i)`` seconds after frame i."""
        await self._send(wire, conn, self._head(200, content_type, extra))
        for i, frame in enumerate(frames):
            if i:
                await asyncio.sleep(gap(i - 1))
            await self._send(wire, conn, h11.Data(data=frame))
        await self._send(wire, conn, h11.EndOfMessage())
        return True

    def _gap(self, i: int) -> float:
        if not self.stream_gaps:
            return 0.0
        return self.stream_gaps[min(i, len(self.stream_gaps) - 1)]

    def _next(self, endpoint: str) -> int:
        n = self.counts.get(endpoint, 0) + 1
        self.counts[endpoint] = n
        return n

    # -- routing --
    async def _dispatch(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        path, method = req.path, req.method
        try:
            if path == "/v1/chat/completions" and method == "POST":
                return await self._chat(wire, conn, req)
            if path == "/v1/messages" and method == "POST":
                return await self._messages(wire, conn, req)
            if path == "/tool/counter" and method in ("GET", "POST"):
                return await self._counter(wire, conn, req)
            if path.startswith("/tool/records/") and method == "DELETE":
                return await self._delete(wire, conn, req)
            if path == "/v1/ratelimited":
                return await self._ratelimited(wire, conn, req, truncate=True)
            if path == "/ratelimited/full":
                return await self._ratelimited(wire, conn, req, truncate=False)
            if path == "/misdirected":
                error = {"message": "misdirected request", "type": "misdirected_request"}
                return await self._send_json(
                    wire, conn, 421, {"error": error, "n": self._next("misdirected")}
                )
            if path == "/reset-midstream" and method == "GET":
                return await self._reset_midstream(wire, conn)
            if path == "/gzip" and method == "GET":
                return await self._gzip(wire, conn)
            if path.startswith("/encoded/") and method == "GET":
                return await self._encoded(wire, conn, path.removeprefix("/encoded/"))
            if path.startswith("/encoded/") and method == "POST":
                return await self._encoded_echo(wire, conn, req, path.removeprefix("/encoded/"))
            if path == "/sse/slow" and method == "GET":
                return await self._sse_slow(wire, conn, req)
            if path == "/sse/idle" and method == "GET":
                return await self._sse_idle(wire, conn, req)
            if path == "/bytes" and method == "GET":
                return await self._bytes(wire, conn, req)
            if path == "/bytes/random" and method == "GET":
                return await self._random_bytes(wire, conn, req)
            if path == "/mcp" and method == "POST":
                return await self._mcp(wire, conn, req)
            if path == "/upload" and req.upload is not None:
                digest, size = req.upload
                answer = {"blake3": digest, "size": size, "n": self._next("upload")}
                return await self._send_json(wire, conn, 200, answer)
            if path == "/hang":
                return await self._hang(wire, req)
            if path == "/v1/traces/ingest" and method == "POST":
                return await self._send_json(wire, conn, 200, {"n": self._next("traces")})
            if path in ("/runs/multipart", "/runs/batch") and method == "POST":
                return await self._send_json(wire, conn, 202, {"n": self._next("runs")})
            if path == "/model_prices_and_context_window.json" and method == "GET":
                self._next("model_costs")
                return await self._send_json(wire, conn, 200, MODEL_COSTS)
        except _BadRequest as exc:
            error = {"message": str(exc), "type": "invalid_request_error"}
            return await self._send_json(wire, conn, 400, {"error": error})
        n = self._next("not_found")
        error = {
            "message": f"no route for {method} {req.target}",
            "type": "invalid_request_error",
            "code": "not_found",
        }
        return await self._send_json(wire, conn, 404, {"error": error, "n": n})

    @staticmethod
    def _json_body(req: SeenRequest) -> dict[str, Any]:
        try:
            body = json.loads(req.body or b"null")
        except ValueError as exc:
            raise _BadRequest(f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest("request body must be a JSON object")
        return body

    # -- OpenAI --
    async def _chat(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        body = self._json_body(req)
        n = self._next("chat")
        model = str(body.get("model") or "gpt-test")
        text = f"answer {n} to: {_last_user_text(body.get('messages'))}"
        created = int(time.time())
        extra = [
            ("x-request-id", f"req_{n}"),
            ("openai-organization", "org-test"),
            ("openai-processing-ms", str(100 + n)),
            ("openai-version", "2020-10-01"),
            ("x-ratelimit-limit-requests", "10000"),
            ("x-ratelimit-remaining-requests", str(max(0, 10000 - n))),
        ]
        calls = self._chat_tool_calls(body, n)
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if calls:
                message.update(content=None, tool_calls=calls)
            answer = {
                "id": f"chatcmpl-{self.id_salt}{n}",
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": f"fp_{n}",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            return await self._send_json(wire, conn, 200, answer, extra, pretty=True)

        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )

        def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
            obj: dict[str, Any] = {
                "id": f"chatcmpl-{self.id_salt}{n}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": f"fp_{n}",
                "choices": choices,
            }
            if include_usage:
                obj["usage"] = usage
            return b"data: " + _compact(obj) + b"\n\n"

        def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

        frames = [chunk(choice({"role": "assistant", "content": "", "refusal": None}))]
        if calls:
            frames += self._chat_tool_call_frames(calls, chunk, choice)
        else:
            frames += [chunk(choice({"content": piece})) for piece in _words(text)]
        frames.append(chunk(choice({}, finish)))
        if include_usage:
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            frames.append(chunk([], usage))
        frames.append(b"data: [DONE]\n\n")
        extra.append(("cache-control", "no-cache"))
        return await self._send_stream(wire, conn, frames, extra, gap=self._gap)

    def _chat_tool_calls(self, body: dict[str, Any], n: int) -> list[dict[str, Any]]:
        """A call of each function tool offered (of the first alone when
        ``parallel_tool_calls`` is false), when the user has just spoken."""
        tools = [
            tool["function"]
            for tool in body.get("tools") or []
            if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
        ]
        text = _last_user_text(body.get("messages"))
        ending = [tool for tool in tools if tool.get("name") == FINAL_ANSWER]
        if ending and text.startswith(OBSERVATION):
            tools = ending  # the tools' results, written as text: the run's answer is due
        elif not _asks_for_tools(body.get("messages"), tools):
            return []
        elif ending and len(ending) < len(tools):
            tools = [tool for tool in tools if tool.get("name") != FINAL_ANSWER]
        if body.get("parallel_tool_calls") is False:
            tools = tools[:1]
        return [
            {
                "id": f"call_{self.id_salt}{n}_{i}",
                "type": "function",
                "function": {
                    "name": str(tool.get("name")),
                    "arguments": json.dumps(tool_arguments(tool.get("parameters"), text)),
                },
            }
            for i, tool in enumerate(tools)
        ]

    @staticmethod
    def _chat_tool_call_frames(
        calls: list[dict[str, Any]],
        chunk: Callable[[list[dict[str, Any]]], bytes],
        choice: Callable[[dict[str, Any]], list[dict[str, Any]]],
    ) -> list[bytes]:
        """Each call as OpenAI streams it: id, type and name first with empty arguments, then
        the arguments a few characters per chunk."""
        frames = []
        for index, call in enumerate(calls):
            function = call["function"]
            head = {**call, "index": index, "function": {"name": function["name"], "arguments": ""}}
            frames.append(chunk(choice({"tool_calls": [head]})))
            for piece in _pieces(function["arguments"]):
                delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                frames.append(chunk(choice(delta)))
        return frames

    # -- Anthropic --
    async def _messages(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        body = self._json_body(req)
        n = self._next("messages")
        model = str(body.get("model") or "claude-test")
        text = f"answer {n} to: {_last_user_text(body.get('messages'))}"
        extra = [
            ("request-id", f"req_{n}"),
            ("anthropic-organization-id", "org-test"),
            ("anthropic-ratelimit-requests-limit", "1000"),
            ("anthropic-ratelimit-requests-remaining", str(max(0, 1000 - n))),
        ]
        uses = self._tool_uses(body, n)
        stop = "tool_use" if uses else "end_turn"
        message: dict[str, Any] = {
            "id": f"msg_{self.id_salt}{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": uses or [{"type": "text", "text": text}],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        if not body.get("stream"):
            return await self._send_json(wire, conn, 200, message, extra)

        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        if uses:
            events += self._tool_use_events(uses)
        else:
            events += [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {"type": "ping"},
            ]
            events += [
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": p},
                }
                for p in _words(text)
            ]
        overload_after = _int_param(req.query, "overload_after", -1, -1, MAX_SSE_EVENTS)
        if overload_after >= 0:  # the stream dies mid-way with Anthropic's error event
            events = events[: (1 if uses else 3) + overload_after]
            events.append(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
        else:
            if not uses:
                events.append({"type": "content_block_stop", "index": 0})
            events += [
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
                {"type": "message_stop"},
            ]
        frames = [b"event: %s\ndata: %s\n\n" % (e["type"].encode(), _compact(e)) for e in events]
        extra.append(("cache-control", "no-cache"))
        return await self._send_stream(wire, conn, frames, extra, gap=self._gap)

    def _tool_uses(self, body: dict[str, Any], n: int) -> list[dict[str, Any]]:
        """A ``tool_use`` block for each client tool offered (one with an ``input_schema``;
        Anthropic runs the others itself), when the user has just spoken."""
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and "input_schema" in t]
        if not _asks_for_tools(body.get("messages"), tools):
            return []
        text = _last_user_text(body.get("messages"))
        return [
            {
                "type": "tool_use",
                "id": f"toolu_{self.id_salt}{n}_{i}",
                "name": str(tool["name"]),
                "input": tool_arguments(tool.get("input_schema"), text),
            }
            for i, tool in enumerate(tools)
        ]

    @staticmethod
    def _tool_use_events(uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each block as Anthropic streams it: started with an empty input, the input as
        ``input_json_delta`` pieces, then stopped."""
        events: list[dict[str, Any]] = []
        for index, use in enumerate(uses):
            start = {**use, "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            for piece in _pieces(json.dumps(use["input"])):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            events.append({"type": "content_block_stop", "index": index})
        return events

    # -- tools --
    async def _counter(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        n = self._next("counter")
        echo: Any
        if req.method == "POST":
            try:
                echo = json.loads(req.body) if req.body else None
            except ValueError:
                echo = req.body.decode("utf-8", "replace")
        else:
            echo = req.query
        return await self._send_json(wire, conn, 200, {"count": n, "echo": echo})

    async def _delete(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        n = self._next("delete")
        record = req.path.removeprefix("/tool/records/")
        self.deleted.append(record)
        answer = {"deleted": record, "remaining": max(0, 100 - n), "n": n}
        return await self._send_json(wire, conn, 200, answer)

    # -- failure modes --
    async def _ratelimited(
        self, wire: _Wire, conn: h11.Connection, req: SeenRequest, *, truncate: bool
    ) -> bool:
        """``?retry_after=S`` sets ``retry-after`` (default 0); ``?retryable=1`` leaves out
        ``x-should-retry: false`` so that SDKs retry, sleeping what ``retry-after`` says."""
        n = self._next("ratelimited" if truncate else "ratelimited_full")
        body = rate_limit_body(n)
        extra = [("retry-after", str(_int_param(req.query, "retry_after", 0, 0, 60)))]
        if req.query.get("retryable") != "1":
            extra.append(("x-should-retry", "false"))
        extra.append(("x-request-id", f"req_{n}"))
        if not truncate:
            return await self._send_full(wire, conn, 429, "application/json", body, extra)
        head = self._head(429, "application/json", extra, length=len(body))
        cut = int(len(body) * RATE_LIMIT_SENT_FRACTION)
        await self._send(wire, conn, head, h11.Data(data=body[:cut]))
        await wire.flushed()
        await wire.close()  # flush, close_notify, FIN -- never the rest of the body
        return False

    async def _reset_midstream(self, wire: _Wire, conn: h11.Connection) -> bool:
        n = self._next("reset")
        await self._send(wire, conn, self._head(200, "text/plain; charset=utf-8"))
        await self._send(wire, conn, h11.Data(data=f"chunk 1 of reset n={n}\n".encode()))
        await self._send(wire, conn, h11.Data(data=f"chunk 2 of reset n={n}\n".encode()))
        await wire.flushed()
        await asyncio.sleep(self.reset_delay)
        wire.reset()
        return False

    async def _gzip(self, wire: _Wire, conn: h11.Connection) -> bool:
        n = self._next("gzip")
        obj = {"gzip": True, "n": n, "text": " ".join(["compressible"] * 50)}
        body = gzip.compress(_compact(obj), mtime=0)
        extra = [("content-encoding", "gzip"), ("vary", "Accept-Encoding")]
        return await self._send_full(wire, conn, 200, "application/json", body, extra)

    async def _encoded(self, wire: _Wire, conn: h11.Connection, coding: str) -> bool:
        if coding not in ENCODERS:
            raise _BadRequest(f"unknown coding {coding!r}; one of {sorted(ENCODERS)}")
        body, _ = encoded_body(coding, self._next(f"encoded/{coding}"))
        extra = [("content-encoding", coding), ("vary", "Accept-Encoding")]
        return await self._send_full(wire, conn, 200, "application/json", body, extra)

    async def _encoded_echo(
        self, wire: _Wire, conn: h11.Connection, req: SeenRequest, coding: str
    ) -> bool:
        if coding not in ENCODERS:
            raise _BadRequest(f"unknown coding {coding!r}; one of {sorted(ENCODERS)}")
        n = self._next(f"encoded/{coding}")
        meant = _compact({"coding": coding, "n": n, "echo": req.body.decode("utf-8", "replace")})
        extra = [("content-encoding", coding), ("vary", "Accept-Encoding")]
        return await self._send_full(
            wire, conn, 200, "application/json", ENCODERS[coding](meant), extra
        )

    async def _sse_slow(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        n = self._next("sse")
        count = _int_param(req.query, "events", 5, 0, MAX_SSE_EVENTS)
        gap = _int_param(req.query, "gap_ms", 50, 0, int(MAX_GAP * 1000)) / 1000
        frames = [b"data: " + json.dumps({"i": k, "n": n}).encode() + b"\n\n" for k in range(count)]
        extra = [("cache-control", "no-cache")]
        return await self._send_stream(wire, conn, frames, extra, gap=lambda _i: gap)

    async def _sse_idle(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        """An event stream's headers, then nothing for ``seconds``: a channel held open for
        what the server may send later (MCP's standalone GET stream)."""
        self._next("sse_idle")
        seconds = _int_param(req.query, "seconds", 5, 0, int(MAX_GAP))
        await self._send(wire, conn, self._head(200, "text/event-stream", []))
        await asyncio.sleep(seconds)
        await self._send(wire, conn, h11.EndOfMessage())
        return True

    async def _bytes(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        n = self._next("bytes")
        size = _int_param(req.query, "size", 1024, 0, MAX_BYTES)
        body = expected_bytes(size, n)
        head = self._head(200, "application/octet-stream", length=size)
        await self._send(wire, conn, head)
        step = 64 * 1024
        for offset in range(0, size, step):
            await self._send(wire, conn, h11.Data(data=body[offset : offset + step]))
        await self._send(wire, conn, h11.EndOfMessage())
        return True

    async def _random_bytes(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        """``size`` bytes of :func:`random_chunks`, generated as sent: a body of any size
        without holding it in memory, and one that does not compress to nothing."""
        self._next("bytes_random")
        size = _int_param(req.query, "size", 1024, 0, MAX_RANDOM_BYTES)
        seed = _int_param(req.query, "seed", 0, 0, 2**31)
        await self._send(wire, conn, self._head(200, "application/octet-stream", length=size))
        for piece in random_chunks(size, seed):
            await self._send(wire, conn, h11.Data(data=piece))
        await self._send(wire, conn, h11.EndOfMessage())
        return True

    async def _hang(self, wire: _Wire, req: SeenRequest) -> bool:
        """Never answer: wait ``?seconds=S`` (default 5, at most 60), then close."""
        self._next("hang")
        await asyncio.sleep(_int_param(req.query, "seconds", 5, 0, 60))
        await wire.close()
        return False

    async def _mcp(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        """MCP over streamable HTTP: a JSON-RPC answer echoing the request's id, as JSON, or
        as an SSE event when the client accepts ``text/event-stream`` first."""
        n = self._next("mcp")
        message = self._json_body(req)
        answer = {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "result": {"content": [{"type": "text", "text": f"call {n}: {message.get('method')}"}]},
        }
        extra = [("mcp-session-id", "session-1")]
        accept = req.header("accept") or ""
        if accept.startswith("text/event-stream"):
            frame = b"event: message\ndata: " + _compact(answer) + b"\n\n"
            return await self._send_stream(wire, conn, [frame], extra, gap=self._gap)
        return await self._send_json(wire, conn, 200, answer, extra)


def random_chunks(size: int, seed: int, step: int = 256 * 1024) -> Iterable[bytes]:
    """The body of ``GET /bytes/random?size=<size>&seed=<seed>``, in pieces."""
    rng = random.Random(seed)
    for offset in range(0, size, step):
        yield rng.randbytes(min(step, size - offset))


class ConnectTunnel(_StreamServer):
    """A tiny plain-HTTP ``CONNECT`` proxy that only tunnels to this machine.

    It records every CONNECT target (``connects``: list of ``"host:port"``) and refuses (403)
    any host other than localhost/127.0.0.1, so pointing HTTPS_PROXY at it can never reach the
    outside. Used to check which clients honour HTTPS_PROXY/NO_PROXY.
    """

    _name = "connect-tunnel"
    ALLOWED_HOSTS = frozenset({"localhost", "127.0.0.1"})

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.connects: list[str] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer: asyncio.StreamWriter | None = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) != 3 or parts[0] != b"CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            authority = parts[1].decode("latin-1")
            self.connects.append(authority)
            host, _, port = authority.rpartition(":")
            if host.strip("[]") not in self.ALLOWED_HOSTS or not port.isdigit():
                writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", int(port)), 5.0
            )
            self._writers.add(up_writer)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
                    with contextlib.suppress(OSError, TimeoutError):
                        await asyncio.wait_for(w.wait_closed(), 1.0)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            for _ in range(10_000_000):
                data = await asyncio.wait_for(src.read(65536), IDLE_TIMEOUT)
                if not data:
                    break
                dst.write(data)
                await asyncio.wait_for(dst.drain(), WRITE_TIMEOUT)
        except (OSError, TimeoutError):
            pass
        finally:
            if dst.can_write_eof() and not dst.is_closing():
                with contextlib.suppress(OSError):
                    dst.write_eof()
