"""MCP's two transport revisions through the proxy, with the ``mcp`` SDK on both ends.

2026-07-28 is stateless: no handshake, ``_meta`` in every request, and headers mirrored from
the body that the server checks. 2025-11-25 has a handshake and a server-minted session id.
Both record and replay with the server unreached; a resent call with a changed argument
carries the mirrored headers of its new body, or the server would refuse it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from starlette.testclient import TestClient
from support.mcp_world import AGENT, McpDesk
from support.proxy import ProxyProcess

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.settings import Address, Settings
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e


@pytest.fixture
def desk(upstream_ca: trustme.CA) -> Iterator[McpDesk]:
    server = McpDesk(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def resumable_desk(upstream_ca: trustme.CA) -> Iterator[McpDesk]:
    server = McpDesk(upstream_ca, stateless=False, resumable=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def legacy_desk(upstream_ca: trustme.CA) -> Iterator[McpDesk]:
    server = McpDesk(upstream_ca, stateless=False).start()
    try:
        yield server
    finally:
        server.stop()


def run_agent(
    proxy: ProxyProcess, url: str, mode: str, region: str = "us-west1", tool: str = "execute_sql"
) -> str:
    from freezeframe.proxy.trust import client_bundle

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= proxy.client_env(client_bundle(proxy.data_dir))
    done = subprocess.run(
        [sys.executable, "-c", AGENT, url, mode, region, tool],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def case_file_page(data_dir: Path, path: str) -> str:
    """A page of the case file, served in-process over the recorded store."""
    store = open_store(f"sqlite:///{data_dir / 'freezeframe.db'}")
    admin = "127.0.0.1:8081"
    settings = Settings(data_dir=data_dir, admin=Address.parse(admin, "admin"))
    try:
        app = create_app(store, RuntimeState(Mode.REPLAY, None), settings)
        with TestClient(app, base_url=f"http://{admin}", follow_redirects=False) as client:
            page = client.get(path)
    finally:
        store.close()
    assert page.status_code == 200, page.text
    return page.text


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_stateless_revision_replays_and_a_resent_call_keeps_its_headers_true(
    start_proxy: Callable[..., ProxyProcess],
    desk: McpDesk,
    data_dir: Path,
    upstream_ca_file: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="sql")
    assert run_agent(recorder, desk.url, "auto") == "3 rows in us-west1 for SELECT 1"
    recorder.stop()
    methods = [headers.get("mcp-method") for _, headers in desk.requests]
    assert "tools/call" in methods and "initialize" not in methods, "no handshake"
    assert desk.requests[-1][1]["mcp-param-region"] == "us-west1"
    reached = len(desk.requests)

    replayer = start_proxy(mode="replay", cassette="sql")
    assert run_agent(replayer, desk.url, "auto") == "3 rows in us-west1 for SELECT 1"
    replayer.stop()
    assert len(desk.requests) == reached, "replay never reached the server"
    assert "replay miss" not in replayer.log_path.read_text()

    listed = json.loads(freezeframe(data_dir, "show", "sql", "--json").stdout)
    answered = [e["seq"] for e in listed if e["status"] == 200]
    seq = answered[-1]  # the call that was answered (its first try lacked Mcp-Param-Region)
    for region in ("eu-west4", "Zürich "):
        resent = freezeframe(
            data_dir, "resend", "sql", str(seq), "--into", "sql-resent",
            "--set", f"$.params.arguments.region={json.dumps(region)}",
            "--upstream-ca", str(upstream_ca_file), "--json",
        )  # fmt: skip
        assert resent.returncode == 0, resent.stderr
        assert json.loads(resent.stdout)["status"] == 200, resent.stdout
        assert desk.calls[-1] == (region, "SELECT 1"), "the server took the changed call"
    sent = desk.requests[-1][1]
    assert sent["mcp-param-region"] == "=?base64?WsO8cmljaCA=?=", "encoded as the revision says"
    assert sent["mcp-name"] == "execute_sql" and sent["mcp-method"] == "tools/call"


def test_the_2025_11_25_revision_replays_with_its_session_and_its_streamed_answer_edits(
    start_proxy: Callable[..., ProxyProcess],
    legacy_desk: McpDesk,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="sql-legacy")
    answer = run_agent(recorder, legacy_desk.url, "legacy")
    recorder.stop()
    assert answer == "3 rows in us-west1 for SELECT 1"
    sessions = {h["mcp-session-id"] for _, h in legacy_desk.requests if "mcp-session-id" in h}
    assert len(sessions) == 1, "the server minted a session"
    reached = len(legacy_desk.requests)

    replayer = start_proxy(mode="replay", cassette="sql-legacy")
    assert run_agent(replayer, legacy_desk.url, "legacy") == answer
    replayer.stop()
    assert len(legacy_desk.requests) == reached, "replay never reached the server"
    assert "replay miss" not in replayer.log_path.read_text()

    calls = []
    for row in json.loads(freezeframe(data_dir, "show", "sql-legacy", "--json").stdout):
        shown = json.loads(
            freezeframe(data_dir, "show", "sql-legacy", str(row["seq"]), "--json").stdout
        )
        if '"tools/call"' in shown["request"]["body"].get("text", ""):
            calls.append(shown)
    streamed = calls[-1]
    content_type = dict((k.lower(), v) for k, v in streamed["response"]["headers"])["content-type"]
    assert content_type.startswith("text/event-stream"), "the call was answered as SSE"
    edited = freezeframe(
        data_dir, "edit", "sql-legacy", str(streamed["seq"]), "--into", "sql-legacy-fix",
        "--set", '$.result.content[0].text="0 rows in us-west1"',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    fixed = start_proxy(mode="replay", cassette="sql-legacy-fix")
    assert run_agent(fixed, legacy_desk.url, "legacy") == "0 rows in us-west1"
    fixed.stop()
    assert len(legacy_desk.requests) == reached


def test_a_2025_11_25_stream_resumed_with_last_event_id_records_and_replays(
    start_proxy: Callable[..., ProxyProcess],
    resumable_desk: McpDesk,
    data_dir: Path,
) -> None:
    """The server closes the call's SSE stream before the result; the SDK's client resumes
    it with GET and Last-Event-ID, as the 2025-11-25 revision says. Both record, and replay
    gives the client the result the same way with the server unreached."""
    desk = resumable_desk
    recorder = start_proxy(mode="record", cassette="resumed")
    answer = run_agent(recorder, desk.url, "legacy", tool="slow_sql")
    recorder.stop()
    assert answer == "3 rows in us-west1 for SELECT 1, after a while"
    resumed = [h for method, h in desk.requests if method == "GET" and "last-event-id" in h]
    assert len(resumed) == 1, desk.requests
    reached = len(desk.requests)

    replayer = start_proxy(mode="replay", cassette="resumed")
    assert run_agent(replayer, desk.url, "legacy", tool="slow_sql") == answer
    replayer.stop()
    assert len(desk.requests) == reached, "replay never reached the server"
    log = replayer.log_path.read_text()
    assert "replay miss" not in log

    listed = json.loads(freezeframe(data_dir, "show", "resumed", "--json").stdout)
    gets = [e for e in listed if e["method"] == "GET"]
    shown = [
        json.loads(freezeframe(data_dir, "show", "resumed", str(e["seq"]), "--json").stdout)
        for e in gets
    ]
    resumption = [
        s for s in shown if any(k.lower() == "last-event-id" for k, _ in s["request"]["headers"])
    ]
    assert len(resumption) == 1
    assert "3 rows in us-west1 for SELECT 1, after a while" in json.dumps(
        resumption[0]["response"]
    ), "the resumed stream carried the result"
    assert f"replayed resumed#{resumption[0]['seq']} for GET" in log
    resumed_get = next(e for e in gets if e["seq"] == resumption[0]["seq"])
    assert (resumed_get["facts"]["provider"], resumed_get["facts"]["api"]) == ("mcp", "mcp")
    sent = {k.lower(): v for k, v in resumption[0]["request"]["headers"]}
    steps_page = case_file_page(data_dir, "/cassettes/resumed/steps")
    assert (
        f'MCP stream resumed after event <code class="event-id">{sent["last-event-id"]}</code>'
        f' · session <code class="session">{sent["mcp-session-id"]}</code>'
    ) in steps_page

    edited = freezeframe(
        data_dir, "edit", "resumed", str(resumption[0]["seq"]), "--into", "resumed-fix",
        "--set", '$.result.content[0].text="0 rows in us-west1"',
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    fixed = start_proxy(mode="replay", cassette="resumed-fix")
    assert run_agent(fixed, desk.url, "legacy", tool="slow_sql") == "0 rows in us-west1"
    fixed.stop()
    assert len(desk.requests) == reached

    keys = set()
    for event_id in ("5", "17"):
        explained = freezeframe(
            data_dir, "explain", "--method", "GET", "--url", desk.url, "--json",
            "--header", "Accept: text/event-stream", "--header", f"Last-Event-ID: {event_id}",
            "--header", "Mcp-Session-Id: 0073ea66243b4deea71aacd28bb8bb4f",
            "--header", "MCP-Protocol-Version: 2025-11-25",
        )  # fmt: skip
        assert explained.returncode == 0, explained.stderr
        keys.add(json.loads(explained.stdout)["key"])
    assert len(keys) == 1, "Last-Event-ID is not in the key"
