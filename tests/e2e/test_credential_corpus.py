"""The credential corpus (tests/support/credential_corpus.py) through a real recording proxy:
no spelling reaches the store, the search index, the proxy's log, a jsonl export, a HAR or
a bundle. Headers, JSON members at any depth, form and multipart fields, query parameters,
a path, response headers, a reason phrase echoing the request's bearer token, and an answer
that echoes the request whole.

The upstream speaks plain HTTP: what is recorded does not depend on TLS, and the proxy's
own TLS is covered by other tests."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
import zstandard
from support.credential_corpus import (
    Spelling,
    corpus,
    header_value,
    json_body,
)
from support.proxy import ProxyProcess

pytestmark = pytest.mark.e2e

SPELLINGS = corpus()
BEARER = header_value("Authorization")
WS_PROTOCOL_KEY = "sk-proj-RealtimeBrowserKey0123456789abcd"
HELICONE_KEY = "sk-helicone-8f7e6d5c-4b3a-2910-8f7e-6d5c4b3a2910"
ANSWER_HEADER_KEY = "gsk_AnswerHeaderKey0123456789abcdefghijklmnopq"
TELEGRAM = "7123456789:AAHqLyjWDarjtT1zdp7dcQm7Vb3kP9sPATH"
SLACK_PATH = "/services/T01ABCDEFGH/B01ABCDEFGH/SlackWebhookPath0123456"


def test_the_corpus_is_large_enough() -> None:
    assert len(SPELLINGS) >= 150
    assert len({s.secret for s in SPELLINGS if s.place != "shape"}) == len(
        [s for s in SPELLINGS if s.place != "shape"]
    )


class Echo(ThreadingHTTPServer):
    """Answers with what it was sent: the body echoed, a key in an answer header, and for the
    JSON request a reason phrase that quotes the bearer token back."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                json_request = self.headers.get("content-type", "").startswith("application/json")
                if json_request:
                    self.send_response(401, f"Unauthorized: {self.headers['authorization']}")
                else:
                    self.send_response(200)
                self.send_header("content-type", self.headers.get("content-type") or "text/plain")
                self.send_header("content-length", str(len(body)))
                self.send_header("x-request-echo", f"key {ANSWER_HEADER_KEY} was used")
                self.send_header("x-api-key", _secret_of("header", "x-api-key"))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET = _answer  # noqa: N815 - http.server's hook names

            def log_message(self, *args: Any) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)


def _secret_of(place: str, name: str) -> str:
    return next(s.secret for s in SPELLINGS if s.place == place and s.name == name)


@pytest.fixture
def origin() -> Iterator[Echo]:
    server = Echo()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _send(proxy: ProxyProcess, origin: Echo) -> None:
    base = f"http://127.0.0.1:{origin.server_port}"
    headers = {s.name: s.value for s in SPELLINGS if s.place == "header"}
    headers["Sec-WebSocket-Protocol"] = f"realtime, openai-insecure-api-key.{WS_PROTOCOL_KEY}"
    headers["Helicone-Target-Auth"] = f"Bearer {HELICONE_KEY}"
    query = urlencode([(s.name, s.value) for s in SPELLINGS if s.place == "query"])
    form = urlencode([(s.name, s.value) for s in SPELLINGS if s.place == "form"])
    with requests.Session() as session:
        session.trust_env = False
        session.proxies = {"http": proxy.url}
        sent = [
            session.post(
                f"{base}/v1/responses",
                # the examples' JSON escapes (\u0073k-…) as a client writes them, escaped once
                data=json.dumps(json_body(SPELLINGS)).replace("\\\\u", "\\u"),
                headers={**headers, "content-type": "application/json"},
            ),
            session.post(
                f"{base}/oauth/token?{query}",
                data=form,
                headers={"content-type": "application/x-www-form-urlencoded"},
            ),
            session.post(
                f"{base}/v1/uploads",
                files={s.name: (None, s.value) for s in SPELLINGS if s.place == "multipart"},
            ),
            session.get(f"{base}/bot{TELEGRAM}/getMe"),
            session.post(f"{base}{SLACK_PATH}", data=b"payload=hi"),
        ]
    assert [answer.status_code for answer in sent] == [401, 200, 200, 200, 200]
    assert sent[0].json()["tools"][0]["authorization"] == _secret_of(
        "json", "tools.0.authorization"
    ), "the client still gets the real answer"


def _export(proxy: ProxyProcess, fmt: str, out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "export", "corpus", "--format", fmt]
        + ["--data-dir", str(proxy.data_dir), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _bundle_text(path: Path) -> str:
    """Every member of a bundle, its zstd bodies unpacked."""
    pieces = []
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            data = archive.read(name)
            if name.startswith("bodies/"):
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            pieces.append(data.decode("utf-8", "replace"))
    return "\n".join(pieces)


def _leaks(text: str, spellings: list[Spelling], extra: tuple[str, ...]) -> list[str]:
    return [s.secret for s in spellings if s.secret in text] + [e for e in extra if e in text]


def test_no_credential_of_the_corpus_is_stored_indexed_logged_or_exported(
    tmp_path: Path, origin: Echo
) -> None:
    proxy = ProxyProcess(tmp_path / "data", cassette="corpus")
    try:
        proxy.start()
        _send(proxy, origin)
        assert len(proxy.stored("corpus", 5, timeout=60)) == 5
    finally:
        proxy.stop()
    extra = (WS_PROTOCOL_KEY[8:], HELICONE_KEY[12:], ANSWER_HEADER_KEY[4:], TELEGRAM[11:])
    extra += (SLACK_PATH.rsplit("/", 1)[1], BEARER.split()[1])
    places = {"proxy log": proxy.log}
    for fmt, name in (("jsonl", "c.jsonl"), ("har", "c.har"), ("bundle", "c.ffcase")):
        _export(proxy, fmt, tmp_path / name)
    places["jsonl"] = (tmp_path / "c.jsonl").read_text()
    places["har"] = (tmp_path / "c.har").read_text()
    places["bundle"] = _bundle_text(tmp_path / "c.ffcase")
    with sqlite3.connect(proxy.data_dir / "freezeframe.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        places["search index"] = "\n".join(str(row) for row in db.execute("SELECT * FROM texts"))
    places["store file"] = (proxy.data_dir / "freezeframe.db").read_bytes().decode("latin-1")
    assert "[redacted:" in places["jsonl"] and "[redacted:" in places["search index"]
    leaks = {where: _leaks(text, SPELLINGS, extra) for where, text in places.items()}
    assert leaks == {where: [] for where in places}
    exported = [json.loads(line) for line in places["jsonl"].splitlines()[1:]]
    reasons = [line["response"]["reason"] for line in exported if line.get("response")]
    assert reasons[0].startswith("Unauthorized: [redacted:"), reasons
    texts = [line["request"]["body"].get("text") or "" for line in exported]
    request = json.loads(next(text for text in texts if text.startswith('{"model"')))
    assert request["max_output_tokens"] == 64, "numbers and counts stay as sent"
    assert request["tools"][0]["headers"]["Authorization"].startswith("[redacted:")


def test_a_request_keyed_with_a_redacted_token_replays_when_the_agent_sends_it_again(
    tmp_path: Path, origin: Echo
) -> None:
    """An MCP-using agent sends its connector's OAuth token inside every model call's body
    (OpenAI Responses ``tools[].authorization``). The token is stored as a marker, and the
    request's key is read from the redacted body: the marker is the same for the same token,
    so the replayed run, sending the real token again, finds its recording."""
    token = "mcp-oauth-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    body = {
        "model": "gpt-4.1",
        "input": "list my open issues",
        "tools": [
            {
                "type": "mcp",
                "server_label": "tracker",
                "server_url": "https://mcp.tracker.example/sse",
                "authorization": token,
                "headers": {"Authorization": f"Bearer {token}"},
            }
        ],
    }
    url = f"http://127.0.0.1:{origin.server_port}/v1/responses"

    def send(proxy: ProxyProcess, with_token: str) -> requests.Response:
        sent = json.loads(json.dumps(body).replace(token, with_token))
        with requests.Session() as session:
            session.trust_env = False
            return session.post(
                url, json=sent, headers={"authorization": "Bearer k"}, proxies={"http": proxy.url}
            )

    data = tmp_path / "data"
    recorder = ProxyProcess(data, cassette="mcp")
    try:
        recorder.start()
        recorded = send(recorder, token)
        assert recorded.status_code == 401
        assert len(recorder.stored("mcp", 1, timeout=60)) == 1
    finally:
        recorder.stop()
    assert token.encode() not in (data / "freezeframe.db").read_bytes()
    replayer = ProxyProcess(data, mode="replay", cassette="mcp")
    try:
        replayer.start()
        replayed = send(replayer, token)
        other = send(replayer, token.replace("0f1e", "9999"))
    finally:
        replayer.stop()
    assert replayed.status_code == 401, replayed.text
    assert replayed.json()["tools"][0]["authorization"].startswith("[redacted:")
    assert other.status_code != 401, "another token is another request"
