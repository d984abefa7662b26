"""addons.uploads: request bodies too large to hold, keyed by their bytes alone."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from support.addon_chain import TOKEN, Answer, Chain, request

from freezeframe.addons.state import Mode
from freezeframe.addons.uploads import LARGE_BODY, body_streams
from freezeframe.storage import Store

NEVER = Answer(error="replay asked the upstream")
MIB = 1024 * 1024


def cut(body: bytes, size: int) -> list[bytes]:
    return [body[at : at + size] for at in range(0, len(body), size)]


def large_body() -> bytes:
    return bytes(range(256)) * (LARGE_BODY // 256) + b"and then " + TOKEN.encode() * 100


def multipart(boundary: str, data: bytes) -> bytes:
    return (
        (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="purpose"\r\n\r\n'
            "fine-tune\r\n"
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="file"; filename="data.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )


@pytest.mark.asyncio
async def test_a_large_body_is_keyed_the_same_however_the_network_cut_it(store: Store) -> None:
    body = large_body()
    answer = Answer(pieces=(b'{"uploaded": true}',))
    async with Chain(store) as chain:
        await chain.send(request("PUT", body=body), cut(body, MIB), answer)
    store.flush(10)
    async with Chain(store, Mode.REPLAY) as chain:
        flow = request("PUT", body=body)
        received = await chain.send(flow, cut(body, 333_333), NEVER)
        missed = await chain.send(request("PUT", body=body[:-1] + b"!"), [body], NEVER)

    assert (received.status, received.body) == (200, b'{"uploaded": true}')
    assert flow.request.host == "api.example.com"  # named as sent once it was answered
    assert missed.status == 404
    assert json.loads(missed.body)["error"]["type"] == "freezeframe_replay_miss"


@pytest.mark.asyncio
async def test_a_small_chunked_body_is_keyed_as_a_held_one(store: Store) -> None:
    body = json.dumps({"model": "m", "input": "hello"}).encode()
    chunked = [("content-type", "application/json"), ("transfer-encoding", "chunked")]
    async with Chain(store) as chain:
        flow = request("POST", body=body, headers=chunked)
        await chain.send(flow, cut(body, 5), Answer(pieces=(b'{"n": 1}',)))
        assert callable(flow.request.stream)
    store.flush(10)
    (summary,) = store.exchanges("default")
    assert store.exchange("default", summary.seq).recorded.request_body == body
    async with Chain(store, Mode.REPLAY) as chain:
        held = request("POST", body=body, headers=[("content-type", "application/json")])
        received = await chain.send(held, [body], NEVER)

    assert received.body == b'{"n": 1}'


@pytest.mark.asyncio
async def test_a_large_multipart_form_matches_whatever_boundary_the_client_picks(
    store: Store,
) -> None:
    data = bytes(range(256)) * (LARGE_BODY // 256 + 1)
    first, second = multipart("first-boundary", data), multipart("other", data)

    def form(boundary: str, body: bytes) -> http.HTTPFlow:
        kind = f"multipart/form-data; boundary={boundary}"
        return request("POST", body=body, headers=[("content-type", kind)])

    async with Chain(store) as chain:
        await chain.send(form("first-boundary", first), cut(first, MIB), Answer())
    store.flush(10)
    async with Chain(store, Mode.REPLAY) as chain:
        received = await chain.send(form("other", second), cut(second, 700_001), NEVER)

    assert (received.status, received.body) == (200, b'{"ok": true}')


@pytest.mark.asyncio
async def test_a_large_body_with_a_bad_cassette_is_read_to_its_end_then_refused(
    store: Store,
) -> None:
    body = large_body()
    async with Chain(store, Mode.REPLAY) as chain:
        flow = request("PUT", body=body, headers=[("x-freezeframe-cassette", "../etc")])
        received = await chain.send(flow, cut(body, MIB), NEVER)

    assert received.status == 400
    assert json.loads(received.body)["error"]["type"] == "freezeframe_bad_cassette"


def test_only_bodies_that_may_be_large_stream() -> None:
    def streams(version: str, *headers: tuple[str, str]) -> tuple[bool, bool]:
        return body_streams(request("POST", headers=headers, http_version=version).request)

    assert streams("HTTP/1.1", ("transfer-encoding", "chunked")) == (True, False)
    assert streams("HTTP/1.1", ("content-length", str(LARGE_BODY + 1))) == (True, True)
    assert streams("HTTP/1.1", ("content-length", str(LARGE_BODY))) == (False, False)
    assert streams("HTTP/2.0") == (False, False)  # no length: buffered, as mitmproxy would
    assert streams("HTTP/1.1", ("content-length", "many")) == (False, False)
