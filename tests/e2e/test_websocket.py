"""WebSockets (OpenAI's Realtime API) are recorded message by message and replayed in order.

A real ``freezeframe run`` between real clients (the openai SDK's realtime client and a plain
``websockets`` client, both through ``HTTPS_PROXY``) and a local TLS server shaped like the
Realtime API. Replay must open no connection to it, give the client the same server events
in the same order at the recorded pace, and end the connection the way it ended.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import trustme
from support.credential_corpus import corpus, json_body
from support.proxy import ProxyProcess
from support.ws_upstream import HANDSHAKE_S, WsUpstream
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
GAPS = (0.05, 0.3, 0.02, 0.25, 0.1)
TIMEOUT = 10.0
OPENAI_KEY = "sk-e2e-realtime-0123456789abcdefghij"
AUDIO = bytes(range(256)) * 4


@pytest.fixture
def ws_upstream(upstream_ca: trustme.CA) -> Iterator[WsUpstream]:
    server = WsUpstream(upstream_ca, gaps=GAPS).start()
    try:
        yield server
    finally:
        server.stop()


def open_session(up: WsUpstream, key: str = OPENAI_KEY) -> ClientConnection:
    return connect(
        up.url("/v1/realtime?model=gpt-realtime"),
        additional_headers={"Authorization": f"Bearer {key}"},
        open_timeout=HANDSHAKE_S,
        close_timeout=TIMEOUT,
    )


def receive(ws: ClientConnection) -> str | bytes:
    return ws.recv(timeout=TIMEOUT)


def talk(ws: ClientConnection) -> tuple[list[str | bytes], list[float]]:
    """A Realtime-style session: every server message the client saw, and when it arrived
    (seconds since ``response.create`` was sent). The connection is left open."""
    seen: list[str | bytes] = [receive(ws)]
    ws.send(json.dumps({"type": "session.update", "session": {"instructions": "be brief"}}))
    seen.append(receive(ws))
    ws.send(json.dumps({"type": "response.create"}))
    start = time.monotonic()
    times = []
    for _ in range(20):
        seen.append(receive(ws))
        times.append(time.monotonic() - start)
        if json.loads(seen[-1])["type"] == "response.done":
            break
    ws.send(AUDIO)
    seen.append(receive(ws))
    return seen, times


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def show(proxy: ProxyProcess, cassette: str, seq: int) -> dict[str, Any]:
    shown = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "show", cassette, str(seq), "--json"]
        + ["--data-dir", str(proxy.data_dir)],
        capture_output=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    document: dict[str, Any] = json.loads(shown.stdout)
    return document


def test_a_session_replays_in_order_at_its_pace_without_the_upstream(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record", cassette="realtime")
    client_env(recorder)
    with open_session(ws_upstream) as ws:
        recorded, recorded_times = talk(ws)
    assert recorded[-1] == AUDIO, "the binary message came back unchanged"
    assert recorder.stop() == 0
    assert ws_upstream.connections == 1

    document = show(recorder, "realtime", 0)
    assert document["outcome"] == "complete"
    assert document["error"] == "closed by client: 1000"
    assert document["response"]["status"] == 101
    messages = document["messages"]
    server = [m for m in messages if m["from"] == "server"]
    assert [m["text"] for m in server if m["type"] == "text"] == recorded[:-1]
    assert [m["type"] for m in messages if m["from"] == "client"] == ["text", "text", "binary"]
    assert messages == sorted(messages, key=lambda m: m["at"])
    headers = json.dumps(document["request"]["headers"])
    assert OPENAI_KEY not in headers and "[redacted:" in headers

    replayer = start_proxy(mode="replay", cassette="realtime")
    client_env(replayer)
    with open_session(ws_upstream) as ws:
        replayed, replayed_times = talk(ws)
    assert replayed == recorded, "the same server events, in the same order"
    assert ws_upstream.connections == 1, "replay opened a connection upstream"
    for want, got in zip(gaps(recorded_times), gaps(replayed_times), strict=True):
        assert abs(got - want) <= max(0.2 * want, 0.05), (recorded_times, replayed_times)

    replayer.admin("PUT", "/api/mode", json={"pace": "instant"})
    with open_session(ws_upstream) as ws:
        instant, instant_times = talk(ws)
    assert instant == recorded
    assert instant_times[-1] < 0.2 * recorded_times[-1], "instant pace kept the recorded gaps"
    assert ws_upstream.connections == 1


# openai's sync realtime client calls websockets' connect() outside a context manager, which
# websockets >= 17.1 deprecates; the warning is theirs to fix, not a freezeframe behaviour.
@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager")
def test_the_openai_realtime_client_replays_its_session(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def session() -> list[dict[str, Any]]:
        client = openai.OpenAI(base_url=f"{ws_upstream.base_url}/v1", api_key=OPENAI_KEY)
        events: list[dict[str, Any]] = []
        with client.realtime.connect(
            model="gpt-realtime", websocket_connection_options={"open_timeout": HANDSHAKE_S}
        ) as connection:
            events.append(connection.recv().model_dump())
            connection.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Say hello"}],
                }
            )
            events.append(connection.recv().model_dump())
            connection.response.create()
            for event in connection:
                events.append(event.model_dump())
                if event.type == "response.done":
                    break
        return events

    recorder = start_proxy(mode="record", cassette="sdk", args=("--replay-pace", "instant"))
    client_env(recorder)
    recorded = session()
    assert [e["type"] for e in recorded][:3] == [
        "session.created",
        "conversation.item.created",
        "response.created",
    ]
    assert recorder.stop() == 0

    replayer = start_proxy(mode="replay", cassette="sdk", args=("--replay-pace", "instant"))
    client_env(replayer)
    assert session() == recorded
    assert ws_upstream.connections == 1


def test_a_server_close_code_replays_as_recorded(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def closed_by_server() -> tuple[int | None, str | None]:
        with open_session(ws_upstream) as ws:
            receive(ws)
            ws.send(json.dumps({"type": "test.close", "code": 4001, "reason": "session expired"}))
            with pytest.raises(ConnectionClosed) as closed:
                receive(ws)
        assert closed.value.rcvd is not None, "no close frame"
        return closed.value.rcvd.code, closed.value.rcvd.reason

    recorder = start_proxy(mode="record", cassette="close")
    client_env(recorder)
    assert closed_by_server() == (4001, "session expired")
    assert recorder.stop() == 0
    assert show(recorder, "close", 0)["error"] == "closed by server: 4001 session expired"

    # At the recorded pace the 101 would wait as long as the recording's did, upstream
    # connection included, on top of this replay's own start: on a busy machine the two
    # together outlast the client's 10 s handshake. The close is what is checked here.
    replayer = start_proxy(mode="replay", cassette="close", args=("--replay-pace", "instant"))
    client_env(replayer)
    assert closed_by_server() == (4001, "session expired")
    assert ws_upstream.connections == 1


def test_a_divergent_client_message_ends_the_replay_with_1008(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record", cassette="diverge")
    client_env(recorder)
    with open_session(ws_upstream) as ws:
        talk(ws)
    assert recorder.stop() == 0

    replayer = start_proxy(mode="replay", cassette="diverge", args=("--replay-pace", "instant"))
    client_env(replayer)
    brief = {"type": "session.update", "session": {"instructions": "be brief"}}
    verbose = {"type": "session.update", "session": {"instructions": "be verbose"}}
    with open_session(ws_upstream) as ws:
        assert json.loads(receive(ws))["type"] == "session.created"
        ws.send(json.dumps({"event_id": "evt_fresh", **brief}))
        assert json.loads(receive(ws))["type"] == "session.updated", "event_id is compared"
        ws.send(json.dumps(verbose))
        with pytest.raises(ConnectionClosed) as closed:
            receive(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == "freezeframe: replay diverged at message 3"
    assert ws_upstream.connections == 1
    assert "diverged at message 3" in replayer.log


def test_a_session_cut_by_stopping_the_proxy_keeps_what_was_seen(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record", cassette="cut")
    client_env(recorder)
    with open_session(ws_upstream) as ws:
        seen, _ = talk(ws)
        assert recorder.stop() == 0

    document = show(recorder, "cut", 0)
    assert document["outcome"] == "incomplete"
    server = [m for m in document["messages"] if m["from"] == "server"]
    assert [m["text"] for m in server if m["type"] == "text"] == seen[:-1]
    assert base64.b64decode(server[-1]["base64"]) == seen[-1] == AUDIO

    replayer = start_proxy(mode="replay", cassette="cut", args=("--replay-pace", "instant"))
    client_env(replayer)
    with open_session(ws_upstream) as ws:
        assert talk(ws)[0] == seen
        with pytest.raises(ConnectionClosed):
            receive(ws)  # the recording ends there, and so does the connection
    assert ws_upstream.connections == 1


def test_a_token_sent_in_a_message_is_not_recorded_and_still_replays(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    token = "rt-live-token-0123456789abcdef"  # no known key shape: scrubbed as the request's
    update = {"type": "session.update", "session": {"instructions": f"use {token}"}}

    def updated() -> dict[str, Any]:
        with open_session(ws_upstream, key=token) as ws:
            receive(ws)
            ws.send(json.dumps(update))
            event: dict[str, Any] = json.loads(receive(ws))
            return event

    recorder = start_proxy(mode="record", cassette="token")
    client_env(recorder)
    assert updated()["session"]["instructions"] == f"use {token}"
    assert recorder.stop() == 0
    document = json.dumps(show(recorder, "token", 0))
    assert token not in document

    replayer = start_proxy(mode="replay", cassette="token", args=("--replay-pace", "instant"))
    client_env(replayer)
    replayed = updated()
    assert replayed["type"] == "session.updated", "the live message matched its redacted record"
    assert token not in replayed["session"]["instructions"], "the echo was redacted too"
    assert ws_upstream.connections == 1


def test_no_credential_of_the_corpus_sent_in_a_message_is_recorded(
    ws_upstream: WsUpstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    """Messages are redacted as bodies are: by place (every JSON member of the corpus at any
    depth, an MCP tool's authorization among them) and by shape (every rule's examples), in
    what the client sends and in the server's echo of it."""
    spellings = [s for s in corpus() if s.place in ("json", "shape")]
    session = json_body(spellings)
    # the examples' JSON escapes (\u0073k-…) as a client writes them, escaped once
    update = json.dumps({"type": "session.update", "session": session}).replace("\\\\u", "\\u")
    recorder = start_proxy(mode="record", cassette="corpus")
    client_env(recorder)
    with open_session(ws_upstream) as ws:
        receive(ws)
        ws.send(update)
        echoed = json.loads(receive(ws))
    assert echoed["type"] == "session.updated"
    assert echoed["session"]["tools"] == session["tools"], "the client gets the real echo"
    assert recorder.stop() == 0
    document = json.dumps(show(recorder, "corpus", 0))
    assert document.count("[redacted:") >= 2 * len([s for s in spellings if s.place == "json"])
    leaks = {
        where: [s.secret for s in spellings if s.secret in text]
        for where, text in (("show", document), ("proxy log", recorder.log))
    }
    assert leaks == {"show": [], "proxy log": []}
