"""addons.record, hook by hook: what a forwarded exchange leaves in a real store."""

from __future__ import annotations

import gzip
import json

import pytest
from mitmproxy import http
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketData
from support.addon_chain import TOKEN, Answer, Chain, request

from freezeframe.addons import Routing
from freezeframe.addons.record import STOPPED
from freezeframe.addons.state import Mode
from freezeframe.addons.uploads import LARGE_BODY
from freezeframe.storage import Exchange, Outcome, Store


def only(store: Store, cassette: str = "default") -> Exchange:
    store.flush(10)
    (summary,) = store.exchanges(cassette)
    return store.exchange(cassette, summary.seq)


@pytest.mark.asyncio
async def test_a_forwarded_answer_reaches_the_client_unchanged_and_is_stored_without_secrets(
    store: Store,
) -> None:
    echoed = b'{"token": "' + TOKEN.encode() + b'"}'
    pieces = [b'{"id": 1, ', b'"echo": ' + echoed + b"}"]
    async with Chain(store) as chain:
        body = b'{"model": "m", "input": "hi"}'
        received = await chain.send(
            request("POST", body=body, headers=[("content-type", "application/json")]),
            [body],
            Answer(pieces=pieces),
        )

    assert received.status == 200 and received.body == b"".join(pieces)
    stored = only(store)
    assert stored.recorded.method == "POST" and stored.url == "https://api.example.com/v1/items"
    assert stored.recorded.request_body == body and stored.recorded.outcome is Outcome.COMPLETE
    answer = stored.recorded.response
    assert answer is not None and answer.status == 200
    assert TOKEN.encode() not in answer.body and len(answer.body) == len(b"".join(pieces))
    assert [chunk.offset for chunk in answer.chunks] == [0, len(pieces[0])]
    authorization = dict(stored.recorded.request_headers)[b"authorization"]
    assert authorization.startswith(b"Bearer [redacted:") and TOKEN.encode() not in authorization


@pytest.mark.asyncio
async def test_a_secret_inside_a_gzip_answer_is_stored_re_encoded(store: Store) -> None:
    secret = json.dumps({"echo": TOKEN}).encode()
    compressed = gzip.compress(secret)
    answer = Answer(
        headers=(("content-type", "application/json"), ("content-encoding", "gzip")),
        pieces=(compressed[:10], compressed[10:]),
    )
    async with Chain(store) as chain:
        received = await chain.send(request(), answer=answer)

    assert received.body == compressed  # the client gets the bytes as sent
    response = only(store).recorded.response
    assert response is not None
    assert TOKEN.encode() not in gzip.decompress(response.body)
    assert b"[redacted:" in gzip.decompress(response.body)
    assert len(response.chunks) == 1
    assert dict(response.headers)[b"content-length"] == str(len(response.body)).encode()


@pytest.mark.asyncio
async def test_an_upstream_that_cannot_be_reached_is_recorded_as_failed(store: Store) -> None:
    async with Chain(store) as chain:
        received = await chain.send(request(), answer=Answer(error="connection refused"))

    assert received.status is None
    stored = only(store)
    assert stored.recorded.outcome is Outcome.FAILED and stored.recorded.response is None
    assert stored.recorded.error == "connection refused"


@pytest.mark.asyncio
async def test_an_answer_cut_off_is_recorded_truncated_with_what_arrived(store: Store) -> None:
    answer = Answer(pieces=(b'{"partial": ',), error="peer reset the stream", cut=True)
    async with Chain(store) as chain:
        await chain.send(request(), answer=answer)

    stored = only(store)
    assert (
        stored.recorded.outcome is Outcome.TRUNCATED
        and stored.recorded.error == "peer reset the stream"
    )
    assert stored.recorded.response is not None and stored.recorded.response.body == b'{"partial": '


@pytest.mark.asyncio
async def test_passthrough_streams_the_answer_and_stores_nothing(store: Store) -> None:
    async with Chain(store, Mode.PASSTHROUGH) as chain:
        flow = request()
        received = await chain.send(flow)

    assert received.body == b'{"ok": true}' and flow.response is not None
    assert flow.response.stream is True
    store.flush(10)
    assert not store.has_cassette("default")


@pytest.mark.asyncio
async def test_an_annotated_answer_names_where_it_is_recorded(store: Store) -> None:
    async with Chain(store, annotate=True, cassette="runs") as chain:
        first = await chain.send(request())
        second = await chain.send(request(url="https://api.example.com/v1/other"))

    assert first.header("x-freezeframe-recorded") == "runs#0"
    assert second.header("x-freezeframe-recorded") == "runs#1"
    store.flush(10)
    stored = store.exchange("runs", 0)
    assert stored.recorded.response is not None
    assert b"x-freezeframe-recorded" not in dict(stored.recorded.response.headers)


@pytest.mark.asyncio
async def test_strict_durability_commits_before_the_answer_ends(store: Store) -> None:
    async with Chain(store, strict=True) as chain:
        flow = request()
        received = await chain.send(flow)
        # Read before any flush: the response hook returned only after the commit.
        (summary,) = store.exchanges("default")

    assert summary.status == 200 and received.error is None
    # The client learns the answer is whole only from its end, sent after the hook.
    assert received.header("transfer-encoding") == "chunked"
    assert received.header("content-length") is None
    stored = store.exchange("default", summary.seq).recorded.response
    assert stored is not None and dict(stored.headers)[b"content-length"] == b"12"


@pytest.mark.asyncio
async def test_strict_durability_cuts_off_an_answer_the_store_cannot_keep(store: Store) -> None:
    async with Chain(store, strict=True) as chain:
        flow = request()
        await chain.hook("requestheaders", flow)
        flow.request.data.content = b""
        await chain.hook("request", flow)
        flow.response = http.Response.make(200, b"", {"content-length": "2"})
        flow.response.data.content = None
        await chain.hook("responseheaders", flow)
        assert callable(flow.response.stream)
        flow.response.stream(b"ok")
        flow.response.stream(b"")
        store.close()  # the store goes away before the answer's end
        await chain.hook("response", flow)

    assert flow.error is not None and flow.error.msg == flow.error.KILLED_MESSAGE


@pytest.mark.asyncio
async def test_a_large_upload_streams_into_the_store(store: Store) -> None:
    block = b"x" * (1024 * 1024)
    pieces = [block] * 8 + [b"tail " + TOKEN.encode()]
    size = sum(map(len, pieces))
    assert size > LARGE_BODY
    async with Chain(store) as chain:
        flow = request("PUT", body=b"".join(pieces))
        received = await chain.send(flow, pieces)
        assert callable(flow.request.stream)  # forwarded as it arrived, never held

    assert received.status == 200
    stored = only(store)
    ref = stored.recorded.request_body_ref
    kept = stored.recorded.request_body if ref is None else b"".join(store.read_blob(ref))
    assert len(kept) == size and kept.startswith(block) and TOKEN.encode() not in kept


@pytest.mark.asyncio
async def test_a_secret_split_across_chunks_of_a_large_answer_is_not_stored(
    store: Store,
) -> None:
    block = b"x" * (1024 * 1024)
    secret = TOKEN.encode()
    pieces = [block] * 9 + [b"echo " + secret[:7], secret[7:] + b" end"]
    async with Chain(store) as chain:
        received = await chain.send(request(), answer=Answer(pieces=pieces))

    assert received.body == b"".join(pieces)  # the client gets every byte as sent
    answer = only(store).recorded.response
    assert answer is not None
    ref = answer.body_ref
    kept = answer.body if ref is None else b"".join(store.read_blob(ref))
    assert len(kept) == len(received.body) and secret not in kept


@pytest.mark.asyncio
async def test_a_secret_across_a_block_boundary_of_a_large_upload_is_not_stored(
    store: Store,
) -> None:
    secret = TOKEN.encode()
    body = bytearray(b"y" * (LARGE_BODY + 1024 * 1024))
    at = 1024 * 1024 - 10  # the secret straddles the first 1 MiB block's end
    body[at - 1 : at + len(secret) + 1] = b" " + secret + b" "
    pieces = [bytes(body[i : i + 65_536]) for i in range(0, len(body), 65_536)]
    async with Chain(store) as chain:
        received = await chain.send(request("PUT", body=bytes(body)), pieces)

    assert received.status == 200
    stored = only(store)
    ref = stored.recorded.request_body_ref
    kept = stored.recorded.request_body if ref is None else b"".join(store.read_blob(ref))
    assert len(kept) == len(body) and secret not in kept


@pytest.mark.asyncio
async def test_a_websocket_is_stored_with_its_transcript_when_it_ends(store: Store) -> None:
    headers = [("upgrade", "websocket"), ("connection", "upgrade"), ("sec-websocket-key", "k")]
    async with Chain(store) as chain:
        flow = request(url="https://api.example.com/v1/realtime", headers=headers)
        await chain.hook("requestheaders", flow)
        flow.request.data.content = b""
        await chain.hook("request", flow)
        flow.response = http.Response.make(101, b"", {"upgrade": "websocket"})
        flow.response.data.content = None
        await chain.hook("responseheaders", flow)
        flow.websocket = WebSocketData()
        await chain.hook("response", flow)
        store.flush(10)
        assert not store.has_cassette("default")  # not before it has ended
        flow.websocket = tflow.twebsocketflow().websocket
        assert flow.websocket is not None
        flow.websocket.close_code, flow.websocket.closed_by_client = 1000, True
        await chain.hook("websocket_end", flow)

    stored = only(store)
    assert (
        stored.recorded.outcome is Outcome.COMPLETE
        and stored.recorded.error == "closed by client: 1000"
    )
    assert stored.recorded.messages is not None
    assert [(m.from_client, m.data) for m in stored.recorded.messages] == [
        (True, b"hello binary"),
        (True, b"hello text"),
        (False, b"it's me"),
    ]


@pytest.mark.asyncio
async def test_what_is_in_flight_when_the_proxy_stops_is_stored_incomplete(
    store: Store,
) -> None:
    chain = Chain(store)
    async with chain:
        flow = request()
        await chain.hook("requestheaders", flow)
        flow.request.data.content = b""
        await chain.hook("request", flow)
        flow.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        flow.response.data.content = None
        await chain.hook("responseheaders", flow)
        assert callable(flow.response.stream)
        flow.response.stream(b"data: 1\n\n")
    later = request(url="https://api.example.com/v1/after")
    await chain.hook("requestheaders", later)
    await chain.hook("request", later)

    stored = only(store)
    assert stored.recorded.outcome is Outcome.INCOMPLETE and stored.recorded.error == STOPPED
    assert stored.recorded.response is not None and stored.recorded.response.body == b"data: 1\n\n"


@pytest.mark.asyncio
async def test_a_replayed_answer_is_copied_into_the_new_run(store: Store) -> None:
    async with Chain(store) as chain:
        await chain.send(request(), answer=Answer(pieces=(b'{"recorded": 1}',)))
    store.flush(10)
    routing = Routing(record_into="new")
    async with Chain(store, Mode.REPLAY, routing=routing) as chain:
        received = await chain.send(request(), answer=Answer(error="must not be asked"))

    assert received.body == b'{"recorded": 1}'
    copied = only(store, "new")
    assert copied.recorded.origin is not None and copied.recorded.origin.kind == "replayed"
    assert (copied.recorded.origin.cassette, copied.recorded.origin.seq) == ("default", 0)
    assert (
        copied.recorded.response is not None and copied.recorded.response.body == b'{"recorded": 1}'
    )
