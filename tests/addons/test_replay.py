"""addons.replay, hook by hook: what a client is answered from a real store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.addon_chain import Answer, Chain, request

from freezeframe.addons import Routing
from freezeframe.addons._flows import info_of
from freezeframe.addons.state import RECORDED_PACE, Mode
from freezeframe.proxy.settings import parse_live
from freezeframe.storage import Outcome, Store

NEVER = Answer(error="replay asked the upstream")
JSON = [("content-type", "application/json")]


async def record(
    store: Store, *answers: Answer, url: str = "https://api.example.com/v1/items"
) -> None:
    async with Chain(store) as chain:
        for answer in answers:
            await chain.send(request(url=url), answer=answer)
    store.flush(10)


def error_of(body: bytes) -> dict[str, Any]:
    document = json.loads(body)
    assert document["type"] == "error"
    error: dict[str, Any] = document["error"]
    return error


@pytest.mark.asyncio
async def test_the_nth_request_gets_the_nth_recording_then_an_explained_miss(
    store: Store,
) -> None:
    await record(store, Answer(pieces=(b'{"n": 1}',)), Answer(pieces=(b'{"n": 2}',)))
    async with Chain(store, Mode.REPLAY) as chain:
        first = await chain.send(request(), answer=NEVER)
        second = await chain.send(request(), answer=NEVER)
        third = await chain.send(request(), answer=NEVER)

    assert (first.status, first.body) == (200, b'{"n": 1}')
    assert (second.status, second.body) == (200, b'{"n": 2}')
    assert third.status == 404 and third.header("x-should-retry") == "false"
    error = error_of(third.body)
    assert error["type"] == "freezeframe_replay_miss"
    assert (error["recorded"], error["occurrence"]) == (2, 3)
    assert "all were already served" in str(error["message"])
    assert f"--admin {'127.0.0.1:9'}" in str(error["message"])


@pytest.mark.asyncio
async def test_a_request_never_recorded_is_answered_with_its_nearest_and_kept(
    store: Store,
) -> None:
    await record(store, Answer(), url="https://api.example.com/v1/items?page=1")
    async with Chain(store, Mode.REPLAY) as chain:
        flow = request(url="https://api.example.com/v1/items?page=2")
        received = await chain.send(flow, answer=NEVER)

    assert received.status == 404
    error = error_of(received.body)
    assert error["type"] == "freezeframe_replay_miss" and error["recorded"] == 0
    (nearest,) = error["nearest"]
    assert nearest["seq"] == 0
    assert [d["path"] for d in nearest["differences"]] == ["query.page"]
    store.flush(10)
    (miss,) = store.misses("default")
    assert miss.url == "https://api.example.com/v1/items?page=2" and miss.nearest[0].seq == 0


@pytest.mark.asyncio
async def test_a_cassette_that_does_not_exist_is_said_so(store: Store) -> None:
    async with Chain(store, Mode.REPLAY, cassette="nowhere", annotate=True) as chain:
        received = await chain.send(request(), answer=NEVER)

    assert received.status == 404
    assert error_of(received.body)["type"] == "freezeframe_unknown_cassette"
    assert received.header("x-freezeframe-miss") == "nowhere"


@pytest.mark.asyncio
async def test_an_annotated_hit_names_its_recording_and_its_drift(store: Store) -> None:
    body = json.dumps({"model": "m", "user": "alice"}).encode()
    async with Chain(store) as chain:
        await chain.send(request("POST", body=body, headers=JSON), [body])
    store.flush(10)
    drifted = json.dumps({"model": "m", "user": "bob"}).encode()
    async with Chain(store, Mode.REPLAY, annotate=True) as chain:
        received = await chain.send(
            request("POST", body=drifted, headers=JSON), [drifted], answer=NEVER
        )

    assert received.status == 200
    assert received.header("x-freezeframe-hit") == "default#0"
    assert received.header("x-freezeframe-drift") == "body:$.user"
    store.flush(10)
    assert store.exchange("default", 0).drift[0].paths == ("body:$.user",)


@pytest.mark.asyncio
async def test_a_json_rpc_answer_carries_the_live_request_id(store: Store) -> None:
    def call(n: int) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode()

    answer = Answer(headers=JSON, pieces=(b'{"jsonrpc": "2.0", "id": 1, "result": {}}',))
    async with Chain(store) as chain:
        await chain.send(request("POST", body=call(1), headers=JSON), [call(1)], answer)
    store.flush(10)
    async with Chain(store, Mode.REPLAY, annotate=True) as chain:
        received = await chain.send(
            request("POST", body=call(4711), headers=JSON), [call(4711)], answer=NEVER
        )

    assert json.loads(received.body) == {"jsonrpc": "2.0", "id": 4711, "result": {}}
    assert received.header("content-length") == str(len(received.body))
    assert received.header("x-freezeframe-rewrite") == "jsonrpc-id"


@pytest.mark.asyncio
async def test_auto_mode_answers_what_it_has_and_records_what_it_has_not(store: Store) -> None:
    await record(store, Answer(pieces=(b'{"old": 1}',)))
    async with Chain(store, Mode.AUTO) as chain:
        old = await chain.send(request(), answer=NEVER)
        new = await chain.send(request(), answer=Answer(pieces=(b'{"new": 1}',)))

    assert (old.body, new.body) == (b'{"old": 1}', b'{"new": 1}')
    store.flush(10)
    assert [e.seq for e in store.exchanges("default")] == [0, 1]
    new_answer = store.exchange("default", 1).recorded.response
    assert new_answer is not None and new_answer.body == b'{"new": 1}'


@pytest.mark.asyncio
async def test_a_stopping_proxy_answers_503_instead_of_forwarding(store: Store) -> None:
    await record(store, Answer())
    chain = Chain(store, Mode.REPLAY)
    async with chain:
        pass
    received = await chain.send(request(), answer=NEVER)

    assert received.status == 503
    assert error_of(received.body)["type"] == "freezeframe_stopping"


@pytest.mark.asyncio
async def test_a_store_that_went_away_is_answered_503_and_never_forwarded(store: Store) -> None:
    await record(store, Answer())
    async with Chain(store, Mode.REPLAY) as chain:
        store.close()
        # The cassette loaded at start still answers from memory; one not loaded needs the
        # store, and gets a 503: neither is ever forwarded.
        loaded = await chain.send(request(), answer=NEVER)
        other = await chain.send(
            request(headers=[("x-freezeframe-cassette", "not-loaded")]), answer=NEVER
        )

    assert loaded.status == 200 and loaded.body == b'{"ok": true}'
    assert other.status == 503
    assert error_of(other.body)["type"] == "freezeframe_store_unavailable"


@pytest.mark.asyncio
async def test_a_cut_off_answer_is_re_enacted_cut_off(store: Store) -> None:
    cut = Answer(
        headers=(("content-length", "40"),),
        pieces=(b'{"partial": ',),
        error="peer closed the connection",
        cut=True,
    )
    await record(store, cut)
    async with Chain(store, Mode.REPLAY) as chain:
        flow = request()
        received = await chain.send(flow, answer=NEVER)

    assert received.status == 200 and received.body == b'{"partial": '
    assert received.error is not None  # the connection ended before the body did
    assert flow.response is not None and flow.response.stream is True


@pytest.mark.asyncio
async def test_a_failed_recording_is_answered_as_the_failure_was(store: Store) -> None:
    await record(store, Answer(error="Connection refused"))
    async with Chain(store, Mode.REPLAY) as chain:
        received = await chain.send(request(), answer=NEVER)

    assert received.status == 502 and b"Connection refused" in received.body


@pytest.mark.asyncio
async def test_a_stream_at_recorded_pace_is_re_enacted_piece_by_piece(store: Store) -> None:
    events = (b"data: 1\n\n", b"data: 2\n\n")
    sse = Answer(headers=(("content-type", "text/event-stream"),), pieces=events)
    await record(store, sse)
    async with Chain(store, Mode.REPLAY, pace=RECORDED_PACE) as chain:
        flow = request()
        received = await chain.send(flow, answer=NEVER)

    assert received.body == b"".join(events)
    assert flow.server_conn.address is not None and flow.server_conn.address[0] == "127.0.0.1"


@pytest.mark.asyncio
async def test_a_live_route_after_a_miss_goes_upstream_and_into_the_new_run(
    store: Store,
) -> None:
    await record(store, Answer(pieces=(b'{"n": 1}',)))
    routing = Routing(
        live=(parse_live("api.example.com/v1/*"),), record_into="new", after_miss_live=True
    )
    async with Chain(store, Mode.REPLAY, routing=routing) as chain:
        replayed = await chain.send(request(), answer=NEVER)
        live = await chain.send(request(), answer=Answer(pieces=(b'{"live": 1}',)))

    assert (replayed.body, live.body) == (b'{"n": 1}', b'{"live": 1}')
    store.flush(10)
    kinds = [(e.origin, e.outcome) for e in store.exchanges("new")]
    assert kinds == [("replayed", Outcome.COMPLETE), (None, Outcome.COMPLETE)]


@pytest.mark.asyncio
@pytest.mark.parametrize("session", [None, "shared"])
async def test_the_very_bytes_recorded_are_answered_before_the_request_is_keyed(
    store: Store, session: str | None
) -> None:
    """storage.sent: a request sent as the bytes recorded (credentials and SDK telemetry
    aside) is found by their digest, never decoded, parsed or keyed; one that differs in
    its bytes only is keyed in full, and both count the same key's positions, one each, in
    this process or in the store (replicas sharing a replay session)."""
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    spaced = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    sent = [*JSON, ("authorization", "Bearer sk-recorded-1"), ("user-agent", "sdk/1")]
    async with Chain(store) as chain:
        for n in (1, 2):
            answer = Answer(pieces=(b'{"n": %d}' % n,))
            await chain.send(request("POST", body=body, headers=sent), [body], answer)
    store.flush(10)
    now = [*JSON, ("authorization", "Bearer sk-replayed-2"), ("user-agent", "sdk/2")]
    async with Chain(store, Mode.REPLAY, session=session) as chain:
        same = request("POST", body=body, headers=now)
        first = await chain.send(same, [body], answer=NEVER)
        other = request("POST", body=spaced, headers=now)
        second = await chain.send(other, [spaced], answer=NEVER)
        third = await chain.send(request("POST", body=body, headers=now), [body], answer=NEVER)

    assert (first.status, first.body) == (200, b'{"n": 1}')
    assert (second.status, second.body) == (200, b'{"n": 2}')
    assert third.status == 404  # all served: keyed in full, and one position claimed
    assert (error_of(third.body)["recorded"], error_of(third.body)["occurrence"]) == (2, 3)
    same_info, other_info = info_of(same), info_of(other)
    assert same_info is not None and same_info.canonical is None
    assert other_info is not None and other_info.canonical is not None
