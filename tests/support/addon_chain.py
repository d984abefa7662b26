"""freezeframe's addon chain driven hook by hook, as mitmproxy's HTTP layer drives it.

The unit tests of the addons (tests/addons/) need the chain ``default_addons`` builds, over
a real store, without a proxy process: ``Chain.send`` calls the hooks in the order of
mitmproxy's ``proxy/layers/http`` (``requestheaders``; the body through
``request.stream`` when an addon asked for streaming; ``request``; ``responseheaders``; the
answer through ``response.stream``; ``response``, or ``error``), so an addon is checked by
what it stores and what it answers. The one socket is the re-enactor's own loopback
server: a flow replay routes there is sent to it over TCP, as mitmproxy would forward it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import h11
from mitmproxy import flow as mflow
from mitmproxy import hooks, http
from mitmproxy.test import taddons, tflow

from freezeframe.addons import AddressBook, Routing, RuntimeState, default_addons
from freezeframe.addons.record import Record
from freezeframe.addons.reenact import TOKEN_HEADER, Reenactor
from freezeframe.addons.replay import Replay
from freezeframe.addons.state import INSTANT_PACE, Mode, SharedPositions
from freezeframe.canonicalize import KeyConfig
from freezeframe.storage import Store, open_store
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.perturb import Perturber

KEY = bytes(range(32))
ADMIN = "127.0.0.1:9"
#: The token of the request in ``request()``; every test that sends it expects it redacted.
TOKEN = "sk-test-abcdefghijklmnopqrstuvwxyz0123"


def sqlite_store(directory: Path) -> Store:
    return open_store(f"sqlite:///{directory / 'store.db'}")


def request(
    method: str = "GET",
    url: str = "https://api.example.com/v1/items",
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    *,
    token: bool = True,
    http_version: str = "HTTP/1.1",
) -> http.HTTPFlow:
    """A client's request as mitmproxy hands it to ``requestheaders``: the body is not there
    yet (``Chain.send`` delivers it)."""
    fields = [("host", url.split("/")[2])] if http_version == "HTTP/1.1" else []
    fields += [("authorization", f"Bearer {TOKEN}")] if token else []
    req = http.Request.make(method, url, b"", _fields([*fields, *headers]))
    req.headers.fields = tuple(_fields([*fields, *headers]))  # make() adds content-length: 0
    req.http_version = http_version
    if body and not any(name.lower() == "transfer-encoding" for name, _ in headers):
        req.headers["content-length"] = str(len(body))
    req.data.content = None
    req.timestamp_start = time.time()
    flow = tflow.tflow(req=req)
    flow.request.timestamp_start = req.timestamp_start
    return flow


@dataclass
class Answer:
    """What the upstream answers: a head and body pieces, or a failure (``error``) before
    or after the head (``cut``: the connection dies after the pieces were sent)."""

    status: int = 200
    headers: Sequence[tuple[str, str]] = (("content-type", "application/json"),)
    pieces: Sequence[bytes] = (b'{"ok": true}',)
    error: str | None = None
    cut: bool = False


@dataclass
class Received:
    """What the client received through the chain."""

    status: int | None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    pieces: list[bytes] = field(default_factory=list)
    error: str | None = None

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.decode().lower() == name.lower():
                return value.decode()
        return None


class Chain:
    """``default_addons`` over ``store``, inside mitmproxy's test context."""

    def __init__(
        self,
        store: Store,
        mode: Mode = Mode.RECORD,
        *,
        cassette: str = "default",
        routing: Routing | None = None,
        strict: bool = False,
        annotate: bool = False,
        pace: float = INSTANT_PACE,
        perturber: Perturber | None = None,
        key_config: KeyConfig | None = None,
        session: str | None = None,
    ) -> None:
        self.store = store
        shared = SharedPositions(store, session) if session is not None else None
        self.state = RuntimeState(mode, cassette, pace, annotate, shared)
        self.redactor = Redactor(KEY)
        self.addons = default_addons(
            store,
            self.state,
            self.redactor,
            key_config or KeyConfig(),
            addresses=AddressBook(),
            routing=routing or Routing(),
            admin=ADMIN,
            strict=strict,
            perturber=perturber,
        )
        self.record = next(a for a in self.addons if isinstance(a, Record))
        self.replay = next(a for a in self.addons if isinstance(a, Replay))
        self.reenactor = next(a for a in self.addons if isinstance(a, Reenactor))
        self._context: taddons.context | None = None

    async def __aenter__(self) -> Chain:
        self._context = taddons.context(*self.addons)
        await self.hook("running")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.hook("done")

    async def hook(self, name: str, *args: object) -> None:
        """Call hook ``name`` on every addon in chain order. Unlike mitmproxy's manager, an
        addon's exception propagates, so a test sees it instead of a log line."""
        assert self._context is not None
        event = hooks.all_hooks[name](*args)
        for addon in self.addons:
            await self._context.master.addons.invoke_addon(addon, event)

    async def send(
        self,
        flow: http.HTTPFlow,
        body: Sequence[bytes] = (),
        answer: Answer | None = None,
    ) -> Received:
        """One exchange through the chain; ``answer`` is the upstream's, if it is asked."""
        answer = answer or Answer()
        await self.hook("requestheaders", flow)
        routed = TOKEN_HEADER in flow.request.headers
        if flow.response is None and flow.request.stream and routed:
            return await self._loopback(flow, body)
        stream = flow.request.stream
        if flow.response is None and stream:
            for piece in body:
                if callable(stream):
                    stream(piece)
            if callable(stream):
                stream(b"")
        else:
            flow.request.data.content = b"".join(body)
        flow.request.timestamp_end = time.time()
        await self.hook("request", flow)
        if flow.response is not None:  # answered by an addon: mitmproxy emulates the head
            flow.response.timestamp_start = time.time()
            await self.hook("responseheaders", flow)
            return await self._respond(flow, flow.response.raw_content or b"")
        if TOKEN_HEADER in flow.request.headers:
            return await self._loopback(flow, body)
        return await self._upstream(flow, answer)

    async def _upstream(self, flow: http.HTTPFlow, answer: Answer) -> Received:
        if answer.error is not None and not answer.cut:
            flow.error = mflow.Error(answer.error)
            await self.hook("error", flow)
            return Received(None, error=answer.error)
        response = _head(answer.status, _fields(answer.headers))
        if "content-length" not in response.headers:
            if "transfer-encoding" not in response.headers:
                response.headers["content-length"] = str(sum(map(len, answer.pieces)))
        response.timestamp_start = time.time()
        flow.response = response
        return await self._relay(flow, answer.pieces, cut=answer.error if answer.cut else None)

    async def _relay(
        self, flow: http.HTTPFlow, pieces: Sequence[bytes], cut: str | None = None
    ) -> Received:
        """The answer's head and pieces through the hooks, as mitmproxy relays them."""
        response = flow.response
        assert response is not None
        await self.hook("responseheaders", flow)
        received = Received(response.status_code, list(response.headers.fields))
        stream = response.stream
        for piece in pieces:
            sent = stream(piece) if callable(stream) else piece
            assert isinstance(sent, bytes)  # freezeframe's tees hand each piece on as it came
            received.pieces.append(sent)
        if cut is not None:
            flow.error = mflow.Error(cut)
            await self.hook("error", flow)
            received.body, received.error = b"".join(received.pieces), cut
            return received
        if callable(stream):
            stream(b"")
        if not stream:
            response.data.content = b"".join(pieces)
        response.timestamp_end = time.time()
        return await self._respond(flow, b"".join(received.pieces) if stream else None, received)

    async def _respond(
        self, flow: http.HTTPFlow, body: bytes | None, received: Received | None = None
    ) -> Received:
        response = flow.response
        assert response is not None
        response.timestamp_end = time.time()
        await self.hook("response", flow)
        if received is None:
            received = Received(response.status_code, list(response.headers.fields))
        if body is None or flow.response is None:
            body = response.raw_content or b""
        received.headers = list(response.headers.fields)
        received.body = body
        if flow.error is not None and flow.error.msg == mflow.Error.KILLED_MESSAGE:
            received.error = "killed"  # mitmproxy cuts the answer off before its end
        return received

    async def _loopback(self, flow: http.HTTPFlow, body: Sequence[bytes]) -> Received:
        """Forward a flow routed to the re-enactor over TCP, as mitmproxy would."""
        request = flow.request
        reader, writer = await asyncio.open_connection(request.host, request.port)
        client = h11.Connection(h11.CLIENT)
        head = h11.Request(
            method=request.method, target=request.path, headers=list(request.headers.fields)
        )
        writer.write(client.send(head) or b"")
        pieces: list[bytes] = []
        status: int | None = None
        response_headers: list[tuple[bytes, bytes]] = []
        try:
            if request.stream:
                for piece in body:
                    writer.write(client.send(h11.Data(data=piece)) or b"")
                    await writer.drain()
                request.timestamp_end = time.time()
                await self.hook("request", flow)
            elif request.raw_content:
                writer.write(client.send(h11.Data(data=request.raw_content)) or b"")
            writer.write(client.send(h11.EndOfMessage()) or b"")
            await writer.drain()
            async for event in _events(client, reader):
                if isinstance(event, h11.Response):
                    status = event.status_code
                    response_headers = list(event.headers.raw_items())
                elif isinstance(event, h11.Data):
                    pieces.append(bytes(event.data))
        except h11.RemoteProtocolError as exc:
            return await self._reenacted(flow, status, response_headers, pieces, str(exc))
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        return await self._reenacted(flow, status, response_headers, pieces, None)

    async def _reenacted(
        self,
        flow: http.HTTPFlow,
        status: int | None,
        headers: list[tuple[bytes, bytes]],
        pieces: list[bytes],
        error: str | None,
    ) -> Received:
        if status is None:
            message = error or "server closed the connection before answering"
            flow.error = mflow.Error(message)
            await self.hook("error", flow)
            return Received(None, error=message)
        flow.response = _head(status, headers)
        flow.response.timestamp_start = time.time()
        return await self._relay(flow, pieces, cut=error)


def _head(status: int, headers: list[tuple[bytes, bytes]]) -> http.Response:
    """A response head whose body has not arrived yet, with the headers as given."""
    response = http.Response.make(status, b"", headers)
    response.headers.fields = tuple(headers)  # make() adds content-length: 0 for b""
    response.data.content = None
    return response


def _fields(headers: Sequence[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in headers]


async def _events(client: h11.Connection, reader: asyncio.StreamReader) -> AsyncIterator[object]:
    """The answer's h11 events until its end; raises h11.RemoteProtocolError for a cut."""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            data = await asyncio.wait_for(reader.read(65536), 30)
            client.receive_data(data)
            continue
        if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return
        yield event
