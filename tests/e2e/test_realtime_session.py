"""An OpenAI Realtime session (the openai SDK's realtime client, over a WebSocket) as evidence.

Recorded through the proxy against a local server shaped like the Realtime API: the session
is keyed by the client's events (ids left out), read as a conversation (what the model was
told, what it said) in ``show``, the case file, agent steps, search and the dataset and OTel
exports, and replayed in order without the server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import trustme
from support.proxy import ProxyProcess
from support.ws_upstream import HANDSHAKE_S, WsUpstream

pytestmark = [
    pytest.mark.e2e,
    # openai's sync realtime client calls websockets' connect() outside a context manager,
    # which websockets >= 17.1 deprecates; the warning is theirs, not freezeframe's.
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager"),
]

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
KEY = "sk-e2e-realtime-session-0123456789abcdef"
ORDERS = "You answer questions about orders."
TOOL = {
    "type": "function",
    "name": "lookup_orders",
    "description": "Find a user's orders.",
    "parameters": {"type": "object", "properties": {"user": {"type": "string"}}},
}


@pytest.fixture
def ws_upstream(upstream_ca: trustme.CA) -> Iterator[WsUpstream]:
    server = WsUpstream(upstream_ca, gaps=(0.02, 0.05, 0.02)).start()
    try:
        yield server
    finally:
        server.stop()


def session(up: WsUpstream, prompt: str, proxy: ProxyProcess) -> list[dict[str, Any]]:
    """The session as the client saw it; a handshake that timed out says what ``proxy``
    had logged by then."""
    try:
        return _session(up, prompt)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; the proxy logged:\n{proxy.log}") from exc


def _session(up: WsUpstream, prompt: str) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=f"{up.base_url}/v1", api_key=KEY)
    events: list[dict[str, Any]] = []
    with client.realtime.connect(
        model="gpt-realtime", websocket_connection_options={"open_timeout": HANDSHAKE_S}
    ) as connection:
        events.append(connection.recv().model_dump())
        connection.session.update(
            session={"type": "realtime", "instructions": ORDERS, "tools": [TOOL]}  # type: ignore[list-item]
        )
        events.append(connection.recv().model_dump())
        connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            }
        )
        events.append(connection.recv().model_dump())
        connection.response.create()
        for event in connection:
            events.append(event.model_dump())
            if event.type == "response.done":
                break
    return events


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_realtime_session_is_keyed_read_searched_exported_and_replayed(
    ws_upstream: WsUpstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="rt", args=("--replay-pace", "instant"))
    client_env(recorder)
    recorded = session(ws_upstream, "Where is my order?", recorder)
    recorder.admin("PUT", "/api/mode", json={"cassette": "rt-again"})
    again = session(ws_upstream, "Where is my order?", recorder)
    recorder.admin("PUT", "/api/mode", json={"cassette": "rt-other"})
    session(ws_upstream, "Cancel my order.", recorder)
    assert recorder.stop() == 0
    assert again != recorded, "the server minted new ids and words the second time"

    def shown(cassette: str) -> dict[str, Any]:
        done = freezeframe(data_dir, "show", cassette, "0", "--json")
        assert done.returncode == 0, done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return document

    metadata = shown("rt")["metadata"]
    assert (metadata["provider"], metadata["api"]) == ("openai", "openai.realtime")
    assert metadata["model"] == "gpt-realtime"
    first = shown("rt")["session"]
    assert shown("rt-again")["session"]["key"] == first["key"], "same events, new ids: one key"
    assert shown("rt-other")["session"]["key"] != first["key"], "a changed prompt: another"
    assert first["model"] == "gpt-realtime" and first["system"] == ORDERS
    roles = [(turn["role"], turn["text"]) for turn in first["transcript"]]
    answer = "".join(e["delta"] for e in recorded if e["type"] == "response.output_text.delta")
    assert roles == [("user", "Where is my order?"), ("assistant", answer)]

    text = freezeframe(data_dir, "show", "rt", "0").stdout
    assert "== transcript (gpt-realtime)" in text
    assert "     user: Where is my order?" in text
    assert f"assistant: {' '.join(answer.split())}" in text

    found = json.loads(freezeframe(data_dir, "search", answer.split()[0], "--json").stdout)
    assert {(hit["cassette"], hit["seq"]) for hit in found} >= {("rt", 0)}

    rows = tmp_path / "rows.jsonl"
    assert (
        freezeframe(data_dir, "export", "rt", "-o", str(rows), "--format", "dataset").returncode
        == 0
    )
    row = json.loads(rows.read_text().splitlines()[0])
    assert row["expected"]["content"] == answer
    assert row["metadata"]["api"] == "openai.realtime"
    assert any(m.get("content") == "Where is my order?" for m in row["input"]["messages"])
    assert row["input"]["tools"][0]["function"]["name"] == "lookup_orders"

    spans_file = tmp_path / "spans.json"
    assert (
        freezeframe(data_dir, "export", "rt", "-o", str(spans_file), "--format", "otel").returncode
        == 0
    )
    spans = json.loads(spans_file.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attributes = {a["key"]: a["value"] for a in spans[0]["attributes"]}
    assert attributes["gen_ai.provider.name"] == {"stringValue": "openai"}
    assert attributes["gen_ai.request.model"] == {"stringValue": "gpt-realtime"}

    for kind in ("jsonl", "har", "bundle"):
        exported = tmp_path / f"rt.{kind}"
        done = freezeframe(data_dir, "export", "rt", "-o", str(exported), "--format", kind)
        assert done.returncode == 0, done.stderr
        assert KEY.encode() not in exported.read_bytes(), f"the key reached the {kind} export"
    for exported in (rows, spans_file):
        assert KEY.encode() not in exported.read_bytes()
    for stored in data_dir.glob("freezeframe.db*"):
        assert KEY.encode() not in stored.read_bytes(), f"the key reached {stored.name}"

    replayer = start_proxy(mode="replay", cassette="rt", args=("--replay-pace", "instant"))
    client_env(replayer)
    assert session(ws_upstream, "Where is my order?", replayer) == recorded
    assert ws_upstream.connections == 3, "replay opened no connection upstream"
    steps = replayer.admin("GET", "/cassettes/rt/steps.json").json()
    step = steps["steps"][0]
    assert step["kind"] == "model" and answer.split()[0] in json.dumps(step)
    exchange_page = replayer.admin("GET", "/cassettes/rt/0")
    assert exchange_page.status_code == 200
    assert "Where is my order?" in exchange_page.text, "what the model was told"
    assert answer.split()[0] in exchange_page.text, "what it answered"
    steps_page = replayer.admin("GET", "/cassettes/rt/steps")
    assert steps_page.status_code == 200 and answer.strip() in steps_page.text


def test_an_edited_realtime_answer_replays_as_edited(
    ws_upstream: WsUpstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="rt", args=("--replay-pace", "instant"))
    client_env(recorder)
    recorded = session(ws_upstream, "Where is my order?", recorder)
    assert recorder.stop() == 0

    edited = freezeframe(
        data_dir, "edit", "rt", "0", "--into", "rt-fix",
        "--set", '$.output[0].content[0].text="Your order ord_8821 is processing."',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    shown = json.loads(freezeframe(data_dir, "show", "rt-fix", "0", "--json").stdout)
    assert shown["origin"]["kind"] == "edited"
    assert shown["origin"]["changes"][-1] == "its audio is left as recorded"
    assert shown["session"]["transcript"][-1]["text"] == "Your order ord_8821 is processing."
    verified = freezeframe(data_dir, "verify", "rt-fix")
    assert verified.returncode == 0, verified.stdout + verified.stderr

    replayer = start_proxy(mode="replay", cassette="rt-fix", args=("--replay-pace", "instant"))
    client_env(replayer)
    replayed = session(ws_upstream, "Where is my order?", replayer)
    assert ws_upstream.connections == 1, "the edited session replayed without the server"
    said = "".join(e["delta"] for e in replayed if e["type"] == "response.output_text.delta")
    assert said == "Your order ord_8821 is processing."
    done = replayed[-1]["response"]
    assert done["output"][0]["content"][0]["text"] == "Your order ord_8821 is processing."
    audio = [e for e in recorded if e["type"] == "response.output_audio.delta"]
    assert [e for e in replayed if e["type"] == "response.output_audio.delta"] == audio
