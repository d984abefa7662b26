"""A secret a request carries by name in its body, echoed back by the upstream, through a
real proxy: the MCP connector tokens an agent sends on every model call (OpenAI Responses'
``tools[].authorization``, Anthropic's ``mcp_servers[].authorization_token``) come back in
an MCP error that quotes the bearer, a 401's reason phrase and ``WWW-Authenticate``, and a
streamed answer. Neither token has a key's shape: only the request's body names it, so the
answer is scrubbed of it by value, in every spelling, as of a header's token.

The upstream speaks plain HTTP: what is tested is the proxy's redaction, not TLS."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from support.proxy import ProxyProcess

pytestmark = pytest.mark.e2e

RESPONSES_TOKEN = "mcpoat/Qm7+Vb3kP9sR2tW5nL8cF1hJ4dG6aB3=="
"""An MCP server's OAuth token, no known key shape; '/', '+' and '=' change when encoded."""
MESSAGES_TOKEN = "oat01.Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7Yg1Js5Pe/x"
"""Another, sent to Anthropic's MCP connector."""
TOKENS = (RESPONSES_TOKEN, MESSAGES_TOKEN)


def spellings(secret: str) -> set[str]:
    """The spellings the upstream below echoes a token in, as ``storage.redaction`` knows."""
    escaped = json.dumps(secret)[1:-1]
    return {
        secret,
        quote(secret, safe=""),
        quote(secret, safe="").lower(),
        escaped.replace("/", "\\/"),
    }


class Echo(ThreadingHTTPServer):
    """An origin that quotes the MCP token each request body carries: /v1/responses in a
    401 (reason phrase, ``WWW-Authenticate``, an error body with the token raw, URL-encoded
    and JSON-escaped), /v1/messages in a streamed answer's events."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
                sent = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/v1/responses":
                    token = sent["tools"][0]["authorization"]
                    body = json.dumps(
                        {
                            "error": {
                                "message": f"MCP server refused Bearer {token}",
                                "retry": "https://mcp.example/authorize?token="
                                + quote(token, safe=""),
                                "escaped": json.dumps(token)[1:-1].replace("/", "\\/"),
                            }
                        }
                    ).encode()
                    body = body.replace(b"\\\\/", b"\\/")
                    self.send_response(401, f"Unauthorized: {token}")
                    self.send_header("content-type", "application/json")
                    self.send_header("www-authenticate", f'Bearer error="invalid_token" {token}')
                else:
                    token = sent["mcp_servers"][0]["authorization_token"]
                    events = [
                        {"type": "message_start", "message": {"id": "msg_1"}},
                        {"type": "mcp_tool_result", "content": f"401: Bearer {token} expired"},
                        {"type": "message_stop"},
                    ]
                    body = b"".join(  # JSON-escaped '/', as PHP's and Go's encoders write it
                        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".replace(
                            "/", "\\/"
                        ).encode()
                        for e in events
                    )
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)


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


def test_a_token_a_request_body_names_is_scrubbed_from_its_echoing_answer(
    tmp_path: Path, origin: Echo
) -> None:
    proxy = ProxyProcess(tmp_path / "data", cassette="echoed")
    base = f"http://127.0.0.1:{origin.server_port}"
    requests_sent = (
        (
            "/v1/responses",
            {
                "model": "gpt-4.1",
                "input": "list my issues",
                "tools": [
                    {
                        "type": "mcp",
                        "server_label": "tracker",
                        "server_url": "https://mcp.example/sse",
                        "authorization": RESPONSES_TOKEN,
                    }
                ],
            },
        ),
        (
            "/v1/messages",
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": "list my issues"}],
                "mcp_servers": [
                    {
                        "type": "url",
                        "url": "https://mcp.example/sse",
                        "name": "tracker",
                        "authorization_token": MESSAGES_TOKEN,
                    }
                ],
            },
        ),
    )
    try:
        proxy.start()
        answers = []
        with requests.Session() as session:
            session.trust_env = False
            for path, body in requests_sent:
                answers.append(
                    session.post(
                        base + path,
                        json=body,
                        proxies={"http": f"http://127.0.0.1:{proxy.port}"},
                        timeout=30,
                    )
                )
        assert answers[0].status_code == 401 and RESPONSES_TOKEN in answers[0].text
        assert MESSAGES_TOKEN.replace("/", "\\/") in answers[1].text, "the client gets it all"
        assert len(proxy.stored("echoed", 2, timeout=60)) == 2
    finally:
        proxy.stop()
    exported = tmp_path / "echoed.jsonl"
    done = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "export", "echoed"]
        + ["--data-dir", str(proxy.data_dir), "-o", str(exported)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    places = {"jsonl": exported.read_text(), "proxy log": proxy.log}
    with sqlite3.connect(proxy.data_dir / "freezeframe.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        places["search index"] = "\n".join(str(row) for row in db.execute("SELECT * FROM texts"))
    places["store file"] = (proxy.data_dir / "freezeframe.db").read_bytes().decode("latin-1")
    leaks = {
        where: sorted(s for t in TOKENS for s in spellings(t) if s in text)
        for where, text in places.items()
    }
    assert leaks == {where: [] for where in places}
    lines = [json.loads(line) for line in places["jsonl"].splitlines()[1:]]
    refused = next(line for line in lines if line["request"]["path"] == "/v1/responses")
    assert refused["response"]["reason"].startswith("Unauthorized: [redacted:")
    error = json.loads(refused["response"]["body"]["text"])["error"]
    assert error["message"].startswith("MCP server refused Bearer [redacted:")
    assert "[redacted:" in places["search index"]
