"""A mitmproxy user brings captures along: HAR written by mitmproxy's own savehar addon and
flow files written by ``mitmdump -w``, imported, made safe, and replayed by freezeframe.

One capture is made for the module by a real ``mitmdump`` between the clients and the local
upstreams: a model call carrying an API key, a tool call, a gzip answer, a binary one, and a
WebSocket session.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme
from click.testing import CliRunner
from mitmproxy.io import tnetstring
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream
from support.ws_upstream import HANDSHAKE_S, WsUpstream
from websockets.sync.client import connect

from freezeframe import cli
from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e

API_KEY = "sk-capture-secret-0123456789abcdef"


@dataclass
class Capture:
    flows: Path
    har: Path
    seen: list[tuple[int, bytes]]
    """Status and decoded body of each answer, as the client saw them through mitmdump."""
    messages: list[str | bytes]
    """What the WebSocket client received."""
    upstream: Upstream
    ws: WsUpstream


def calls(client: httpx.Client, base: str) -> list[tuple[int, bytes]]:
    """The HTTP calls: status and body of each answer as the client saw it."""
    answers = [
        client.post(
            f"{base}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {API_KEY}"},
        ),
        client.get(f"{base}/tool/counter", params={"q": "x"}),
        client.get(f"{base}/gzip"),
        client.get(f"{base}/bytes/random", params={"size": "2000", "seed": "3"}),
    ]
    return [(answer.status_code, answer.content) for answer in answers]


def session(ws: WsUpstream, proxy: str, ca: ssl.SSLContext) -> list[str | bytes]:
    """A WebSocket session through ``proxy``: every message the client received."""
    with connect(
        ws.url("/v1/realtime?model=gpt-realtime"),
        proxy=proxy,
        ssl=ca,
        additional_headers={"Authorization": f"Bearer {API_KEY}"},
        open_timeout=HANDSHAKE_S,
        close_timeout=10,
    ) as conversation:
        seen = [conversation.recv(timeout=10)]
        conversation.send(json.dumps({"type": "session.update", "session": {"instructions": "x"}}))
        seen.append(conversation.recv(timeout=10))
        conversation.send(b"\x00\x01binary")
        seen.append(conversation.recv(timeout=10))
    return seen


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "mitmdump exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("mitmdump did not listen")


@pytest.fixture(scope="module")
def capture(
    tmp_path_factory: pytest.TempPathFactory, upstream_ca: trustme.CA, upstream_ca_file: Path
) -> Iterator[Capture]:
    where = tmp_path_factory.mktemp("capture")
    upstream = Upstream(upstream_ca).start()
    ws = WsUpstream(upstream_ca).start()
    port = free_port()
    mitmdump = Path(sys.executable).with_name("mitmdump")
    process = subprocess.Popen(
        [str(mitmdump), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port)]
        + ["--set", f"confdir={where / 'mitm'}"]
        + ["--set", f"ssl_verify_upstream_trusted_ca={upstream_ca_file}"]
        + ["-w", str(where / "capture.flows"), "--set", f"hardump={where / 'capture.har'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)
        ca = ssl.create_default_context(cafile=where / "mitm" / "mitmproxy-ca-cert.pem")
        proxy = f"http://127.0.0.1:{port}"
        with httpx.Client(proxy=proxy, verify=ca, timeout=10) as client:
            seen = calls(client, upstream.base_url)
        messages = session(ws, proxy, ca)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, process.stderr.read() if process.stderr else ""
        yield Capture(where / "capture.flows", where / "capture.har", seen, messages, upstream, ws)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()
        ws.stop()
        upstream.stop()


def freezeframe(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("kind", ["flows", "har"])
def test_a_capture_imports_safe_and_replays_what_the_client_saw(
    capture: Capture, kind: str, tmp_path: Path, upstream_ca_file: Path
) -> None:
    data_dir = tmp_path / "data"
    file = capture.flows if kind == "flows" else capture.har
    code, out, err = freezeframe(
        "import", str(file), "--as", "brought", "--data-dir", str(data_dir)
    )
    assert code == 0, err
    assert "brought: imported 5 exchanges" in out
    assert "5 flows have no chunk timing: they replay at once" in out or (
        "5 of 5 entries have no chunk timing: they replay at once" in out
    )
    assert "no run context" in out

    exported = tmp_path / "brought.jsonl"
    code, _, err = freezeframe(
        "export", "brought", "-o", str(exported), "--data-dir", str(data_dir)
    )
    assert code == 0, err
    assert API_KEY.encode() not in exported.read_bytes()
    assert API_KEY.encode() not in (data_dir / "freezeframe.db").read_bytes()
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        assert store.verify("brought").ok
        chat = store.exchange("brought", 0)
    assert chat.recorded.facts.get("model") == "gpt-4o-mini", "facts are read as for a recording"

    capture.upstream.reset_counters()
    sessions = capture.ws.connections
    replayer = ProxyProcess(
        data_dir, mode="replay", cassette="brought", upstream_ca=upstream_ca_file
    ).start()
    try:
        from freezeframe.proxy.trust import client_bundle

        trusted = ssl.create_default_context(cafile=client_bundle(data_dir))
        with httpx.Client(proxy=replayer.url, verify=trusted, timeout=10) as client:
            replayed = calls(client, capture.upstream.base_url)
        messages = session(capture.ws, replayer.url, trusted)
    finally:
        replayer.kill()
    assert replayed == capture.seen
    assert messages == capture.messages
    assert capture.upstream.connections == 0
    assert capture.ws.connections == sessions, "replay opened a WebSocket upstream"


def test_a_har_field_of_the_wrong_type_is_named_and_nothing_is_imported(
    capture: Capture, tmp_path: Path
) -> None:
    document = json.loads(capture.har.read_text())
    document["log"]["entries"][3]["response"]["status"] = "200"
    broken = tmp_path / "broken.har"
    broken.write_text(json.dumps(document))
    data_dir = tmp_path / "data"
    code, out, err = freezeframe("import", str(broken), "--as", "x", "--data-dir", str(data_dir))
    assert code == 1 and out == ""
    assert err == (
        f"freezeframe: error: {broken}: $.log.entries[3].response.status: "
        "expected an integer, found a string\n"
    )
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        assert store.cassette_names() == []


def test_a_flow_file_of_a_newer_mitmproxy_is_refused_in_one_line(
    capture: Capture, tmp_path: Path
) -> None:
    with open(capture.flows, "rb") as source:
        first = tnetstring.load(source)
    assert isinstance(first, dict)
    first["version"] = 999
    newer = tmp_path / "newer.flows"
    with open(newer, "wb") as out:
        tnetstring.dump(first, out)
    code, _, err = freezeframe("import", str(newer), "--data-dir", str(tmp_path / "data"))
    assert code == 1
    assert err.startswith(f"freezeframe: error: {newer}: flow 1: ")
    assert "flow format version 999, please update mitmproxy" in err
    assert len(err.splitlines()) == 1
