"""addons.reenact: the loopback server, read byte by byte from a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator

import pytest
from mitmproxy import http
from support.addon_chain import KEY, request
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from freezeframe.addons import answers
from freezeframe.addons.reenact import TOKEN_HEADER, Reenactor, Staged
from freezeframe.addons.uploads import RequestBody
from freezeframe.storage import (
    Chunk,
    Exchange,
    Message,
    NewExchange,
    Outcome,
    RecordedResponse,
    Slot,
    Store,
)
from freezeframe.storage.redaction import Redactor

INSTANT = 0.0


def recorded(
    body: bytes,
    offsets: tuple[int, ...] = (0,),
    headers: tuple[tuple[bytes, bytes], ...] = ((b"transfer-encoding", b"chunked"),),
    version: str = "HTTP/1.1",
) -> RecordedResponse:
    return RecordedResponse(
        status=200,
        reason="OK",
        http_version=version,
        headers=headers,
        body=body,
        chunks=tuple(Chunk(offset, 0.0) for offset in offsets),
        first_byte_at=0.0,
    )


def exchange(
    response: RecordedResponse | None,
    outcome: Outcome = Outcome.COMPLETE,
    error: str | None = None,
    duration: float = 0.0,
) -> Exchange:
    recorded = NewExchange(
        cassette="default",
        key="k",
        key_scheme=1,
        canonical=b"{}",
        method="GET",
        scheme="https",
        host="api.example.com",
        port=443,
        path="/",
        http_version="HTTP/1.1",
        request_headers=(),
        request_body=b"",
        started_at=time.time(),
        duration=duration,
        response=response,
        outcome=outcome,
        error=error,
        context={},
        slot=Slot(0, 0),
    )
    return Exchange(recorded, chain="0" * 64)


@contextlib.asynccontextmanager
async def reenactor(store: Store) -> AsyncIterator[Reenactor]:
    addon = Reenactor(store, Redactor(KEY))
    await addon.running()
    try:
        yield addon
    finally:
        await addon.done()


async def exchange_bytes(flow: http.HTTPFlow, body: bytes = b"") -> bytes:
    """Send the routed flow's request as mitmproxy would; all it gets until the close."""
    request = flow.request
    reader, writer = await asyncio.open_connection(request.host, request.port)
    head = [f"{request.method} {request.path} HTTP/1.1".encode()]
    head += [name + b": " + value for name, value in request.headers.fields]
    writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
    writer.write_eof()  # no second request: the server closes once it has answered
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(-1), 10)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def head_and_body(raw: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


@pytest.mark.asyncio
async def test_a_chunked_recording_is_written_where_its_chunks_began(store: Store) -> None:
    body = b"data: one\n\ndata: two\n\n"
    staged = recorded(body, offsets=(0, 11))
    async with reenactor(store) as addon:
        flow = request()
        addon.route(
            flow, exchange(staged), staged, staged.headers + ((b"connection", b"close"),), INSTANT
        )
        assert flow.request.host == "127.0.0.1" and TOKEN_HEADER in flow.request.headers
        raw = await exchange_bytes(flow)

    head, sent = head_and_body(raw)
    assert head[0] == b"HTTP/1.1 200 OK"
    assert b"transfer-encoding: chunked" in head
    assert sent == b"b\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\n0\r\n\r\n"


@pytest.mark.asyncio
async def test_an_http2_answer_without_framing_is_sent_chunked(store: Store) -> None:
    staged = recorded(b"{}", headers=((b"content-type", b"application/json"),), version="HTTP/2.0")
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, exchange(staged), staged, staged.headers, INSTANT)
        raw = await exchange_bytes(flow)

    head, sent = head_and_body(raw)
    assert b"transfer-encoding: chunked" in head
    assert sent.startswith(b"2\r\n{}\r\n0\r\n\r\n")


@pytest.mark.asyncio
async def test_a_truncated_answer_ends_where_it_was_cut(store: Store) -> None:
    staged = recorded(b'{"partial": ', headers=((b"content-length", b"40"),))
    cut = exchange(staged, Outcome.TRUNCATED, "peer closed connection")
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, cut, staged, staged.headers, INSTANT)
        raw = await exchange_bytes(flow)

    assert head_and_body(raw)[1] == b'{"partial": '


@pytest.mark.asyncio
async def test_a_reset_is_re_enacted_as_a_reset(store: Store) -> None:
    staged = recorded(b"partial", headers=((b"content-length", b"40"),))
    reset = exchange(staged, Outcome.TRUNCATED, "stream reset by peer")
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, reset, staged, staged.headers, INSTANT)
        with pytest.raises(ConnectionResetError):
            await exchange_bytes(flow)


@pytest.mark.asyncio
async def test_no_answer_is_silence_for_the_recorded_time_then_a_close(store: Store) -> None:
    silent = exchange(None, Outcome.FAILED, "Client disconnected.", duration=0.3)
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, silent, None, (), 1.0)
        started = time.monotonic()
        raw = await exchange_bytes(flow)

    assert raw == b"" and time.monotonic() - started >= 0.3


@pytest.mark.asyncio
async def test_an_unknown_token_gets_no_answer(store: Store) -> None:
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, exchange(None), None, (), INSTANT)
        flow.request.headers[TOKEN_HEADER] = "not-a-token"
        assert await exchange_bytes(flow) == b""


@pytest.mark.asyncio
async def test_a_routed_upload_is_read_whole_before_it_is_answered(store: Store) -> None:
    body = b"0123456789" * 1000
    seen: list[tuple[int, bool]] = []

    def answer(read: RequestBody) -> http.Response:
        seen.append((read.size, read.ended))
        return answers.error(409, "conflict", "already uploaded")

    async with reenactor(store) as addon:
        flow = request("PUT", body=body)
        addon.route_upload(flow, RequestBody(Redactor(KEY), ()), answer)
        assert flow.request.stream is True  # mitmproxy streams it to the re-enactor
        raw = await exchange_bytes(flow, body)

    head, sent = head_and_body(raw)
    assert head[0].startswith(b"HTTP/1.1 409") and b'"already uploaded"' in sent
    assert seen == [(len(body), True)]


@pytest.mark.asyncio
async def test_a_chunked_upload_is_read_through_its_chunk_framing(store: Store) -> None:
    sizes: list[int] = []

    def answer(read: RequestBody) -> http.Response:
        sizes.append(read.size)
        assert read.small == b"hello, world"
        return answers.error(200, "ok", "read")

    async with reenactor(store) as addon:
        flow = request("POST", headers=[("transfer-encoding", "chunked")])
        addon.route_upload(flow, RequestBody(Redactor(KEY), ()), answer)
        framed = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n"
        raw = await exchange_bytes(flow, framed)

    assert head_and_body(raw)[0][0].startswith(b"HTTP/1.1 200") and sizes == [12]


@pytest.mark.asyncio
async def test_a_body_kept_in_the_store_streams_from_it(store: Store) -> None:
    writer = store.blob_writer()
    data = bytes(range(256)) * 8192  # 2 MiB
    writer.write(data)
    ref = writer.finish()
    staged = RecordedResponse(
        status=200,
        reason="OK",
        http_version="HTTP/1.1",
        headers=((b"content-length", str(len(data)).encode()),),
        body=b"",
        chunks=(Chunk(0, 0.0),),
        first_byte_at=0.0,
        body_ref=ref,
    )
    async with reenactor(store) as addon:
        flow = request()
        addon.route(
            flow, exchange(staged), staged, staged.headers + ((b"connection", b"close"),), INSTANT
        )
        raw = await exchange_bytes(flow)

    assert head_and_body(raw)[1] == data


@pytest.mark.asyncio
async def test_the_loopback_server_stops_with_the_proxy(store: Store) -> None:
    addon = Reenactor(store, Redactor(KEY))
    await addon.running()
    flow = request()
    addon.route(flow, exchange(None), None, (), INSTANT)
    await addon.done()
    await asyncio.sleep(0)
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(flow.request.host, flow.request.port)


def test_staged_holds_what_it_was_given() -> None:
    staged = Staged(exchange(None), None, (), 2.0)
    assert staged.pace == 2.0 and staged.response is None


@pytest.mark.asyncio
async def test_a_websocket_conversation_is_played_back_and_a_divergence_closes_it(
    store: Store,
) -> None:
    upgrade = RecordedResponse(
        status=101,
        reason="Switching Protocols",
        http_version="HTTP/1.1",
        headers=(
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
            (b"sec-websocket-accept", b"recorded"),
        ),
        body=b"",
        chunks=(),
        first_byte_at=0.0,
    )
    transcript = (
        Message(from_client=True, text=True, at=0.0, data=b'{"type": "hello", "event_id": "1"}'),
        Message(from_client=False, text=True, at=0.0, data=b'{"type": "welcome"}'),
        Message(from_client=True, text=True, at=0.0, data=b'{"type": "bye"}'),
        Message(from_client=False, text=True, at=0.0, data=b'{"type": "never sent"}'),
    )
    closed = exchange(upgrade, error="closed by server: 1000")
    recording = dataclasses.replace(
        closed, recorded=dataclasses.replace(closed.recorded, messages=transcript)
    )
    async with reenactor(store) as addon:
        client = WSConnection(ConnectionType.CLIENT)
        placeholder = b"token-to-come"
        handshake = client.send(
            Request(
                host="api.example.com",
                target="/",
                extra_headers=[(TOKEN_HEADER.encode(), placeholder)],
            )
        )
        (key,) = [
            line.split(b":", 1)[1].strip()
            for line in handshake.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        ]
        flow = request(headers=[("sec-websocket-key", key.decode())])
        addon.route(flow, recording, upgrade, upgrade.headers, INSTANT)
        reader, writer = await asyncio.open_connection(flow.request.host, flow.request.port)
        token = flow.request.headers[TOKEN_HEADER].encode()
        writer.write(handshake.replace(placeholder, token))
        received: list[object] = []

        async def until(kind: type) -> None:
            while not any(isinstance(event, kind) for event in received):
                client.receive_data(await asyncio.wait_for(reader.read(65536), 10) or None)
                received.extend(client.events())

        await until(AcceptConnection)
        writer.write(client.send(TextMessage('{"event_id": "2", "type": "hello"}')))
        await until(TextMessage)
        writer.write(client.send(TextMessage('{"type": "something else"}')))
        await until(CloseConnection)
        writer.close()

    (welcome,) = [e for e in received if isinstance(e, TextMessage)]
    (close,) = [e for e in received if isinstance(e, CloseConnection)]
    assert welcome.data == '{"type": "welcome"}'  # the first message matched, event ids aside
    assert (close.code, close.reason) == (1008, "freezeframe: replay diverged at message 2")


@pytest.mark.asyncio
async def test_the_head_is_sent_as_recorded_case_and_order_kept(store: Store) -> None:
    headers = ((b"transfer-encoding", b"chunked"), (b"X-Request-Id", b"abc"), (b"date", b"then"))
    staged = recorded(b"ok", headers=headers)
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, exchange(staged), staged, staged.headers, INSTANT)
        raw = await exchange_bytes(flow)

    head, sent = head_and_body(raw)
    assert head == [
        b"HTTP/1.1 200 OK",
        b"transfer-encoding: chunked",
        b"X-Request-Id: abc",
        b"date: then",
    ]
    assert sent == b"2\r\nok\r\n0\r\n\r\n"


@pytest.mark.asyncio
async def test_an_answer_read_until_close_ends_all_the_same(store: Store) -> None:
    staged = recorded(b"until the end", headers=((b"content-type", b"text/plain"),))
    async with reenactor(store) as addon:
        flow = request()
        addon.route(flow, exchange(staged), staged, staged.headers, INSTANT)
        raw = await exchange_bytes(flow)

    head, sent = head_and_body(raw)
    assert head[-1] == b"transfer-encoding: chunked"
    assert sent == b"d\r\nuntil the end\r\n0\r\n\r\n"


@pytest.mark.asyncio
async def test_one_connection_carries_one_request_after_another(store: Store) -> None:
    first = recorded(b"one", headers=((b"content-length", b"3"),))
    second = recorded(b"two", headers=((b"content-length", b"3"),))
    async with reenactor(store) as addon:
        flows = [request(), request()]
        addon.route(flows[0], exchange(first), first, first.headers, INSTANT)
        addon.route(flows[1], exchange(second), second, second.headers, INSTANT)
        reader, writer = await asyncio.open_connection(flows[0].request.host, flows[0].request.port)
        for flow in flows:
            head = [b"GET / HTTP/1.1", *(n + b": " + v for n, v in flow.request.headers.fields)]
            writer.write(b"\r\n".join(head) + b"\r\n\r\n")
        writer.write_eof()
        raw = await asyncio.wait_for(reader.read(-1), 10)
        writer.close()

    assert raw.count(b"HTTP/1.1 200 OK") == 2
    assert raw.endswith(b"\r\n\r\ntwo") and b"\r\n\r\none" in raw
