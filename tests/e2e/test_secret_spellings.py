"""Secrets in the spellings real traffic carries them in, through a real proxy: a query
token the upstream echoes back URL-encoded, keys written with JSON escapes or form encoding,
credential headers and fields beyond the first list, key shapes secret scanners know; none
reaches the store or an export. And the proxy's own credential never reaches the origin.

The upstream here speaks plain HTTP on purpose: ``Proxy-Authorization`` travels with each
request only over plain HTTP (over HTTPS it goes on the CONNECT alone)."""

from __future__ import annotations

import json
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

QUERY_TOKEN = "EAABx/y+z0Qm7Vb3kP9sR2tW5nL8cF1hJ4dG6=="
"""A Facebook-style access token: '/', '+' and '=' all change when URL-encoded."""
OPENAI_KEY = "sk-proj-Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7Yg1Js5Pe"
AWS_KEY_ID = "AKIAQWERTYUIOPASDFGH"
GITHUB_TOKEN = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
SLACK_TOKEN = "xoxb-2184017761-5219873467-Qq8xR4tN2lM6vB0kC9wD3hF7"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
GOOG_KEY = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
AUTH_TOKEN = "gAAAAABl-auth-token-0123456789abcdef"
PASSWORD = "correct horse battery staple"
CLIENT_SECRET = "cs_live_51HqLyjWDarjtT1zdp7dc"
FORM_TOKEN = "tok_9f8e7d6c5b4a39281706f5e4"
REFERER_KEY = "AIzaSyB-referer-key-4455667788"
PROXY_PASSWORD = "proxy-pass-1f2e3d4c"

SECRETS = (
    QUERY_TOKEN,
    OPENAI_KEY,
    AWS_KEY_ID,
    GITHUB_TOKEN,
    SLACK_TOKEN,
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    GOOG_KEY,
    AUTH_TOKEN,
    PASSWORD,
    CLIENT_SECRET,
    FORM_TOKEN,
    REFERER_KEY,
    PROXY_PASSWORD,
)


def spellings(secret: str) -> set[str]:
    escaped = json.dumps(secret)[1:-1]
    return {
        secret,
        quote(secret, safe=""),
        quote(secret, safe="").lower(),
        escaped,
        escaped.replace("/", "\\/"),
        secret.replace("-", "\\u002d"),
        secret.replace("-", "%2D"),
        secret.replace(" ", "+"),
    }


class Echo(ThreadingHTTPServer):
    """An origin that keeps the headers it was sent and answers with every secret it saw,
    in the spellings APIs use: a next-page link, JSON escapes, form encoding."""

    def __init__(self) -> None:
        self.received: list[dict[str, str]] = []
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
                self.rfile.read(int(self.headers["content-length"]))
                origin.received.append({k.lower(): v for k, v in self.headers.items()})
                answer = {
                    "next": f"/v1/items?after=2&access_token={quote(QUERY_TOKEN, safe='')}",
                    "error": f"token {QUERY_TOKEN!r} expired",
                    "escaped": OPENAI_KEY.replace("-", "\\u002d"),
                    "config": {
                        "aws": AWS_KEY_ID,
                        "github": GITHUB_TOKEN,
                        "slack": SLACK_TOKEN,
                        "key": PRIVATE_KEY,
                    },
                    "access_token": AUTH_TOKEN,
                    "refresh_token": CLIENT_SECRET,
                }
                body = json.dumps(answer).encode().replace(b"\\\\u002d", b"\\u002d")
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("link", f'</v1/items?key={quote(GOOG_KEY)}>; rel="next"')
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


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ProxyProcess]:
    proxy = ProxyProcess(tmp_path / "data", cassette="spellings")
    try:
        yield proxy.start()
    finally:
        proxy.kill()


def send(proxy: ProxyProcess, origin: Echo) -> requests.Response:
    url = f"http://127.0.0.1:{origin.server_port}/v1/login?access_token={quote(QUERY_TOKEN)}"
    form = (
        f"grant_type=password&username=ada&password={quote(PASSWORD)}"
        f"&client_secret={CLIENT_SECRET}&token={FORM_TOKEN}&note=sk%2Dproj-{OPENAI_KEY[8:]}"
    )
    with requests.Session() as session:
        session.trust_env = False
        answer = session.post(
            url,
            data=form,
            headers={
                "content-type": "application/x-www-form-urlencoded",
                "x-goog-api-key": GOOG_KEY,
                "x-auth-token": AUTH_TOKEN,
                "referer": f"https://console.example/keys?key={REFERER_KEY}&tab=2",
            },
            proxies={"http": f"http://ada:{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"},
            timeout=30,
        )
    answer.raise_for_status()
    return answer


def test_no_spelling_of_a_secret_reaches_the_store_or_an_export(
    proxy: ProxyProcess, origin: Echo, tmp_path: Path
) -> None:
    answer = send(proxy, origin)
    assert quote(QUERY_TOKEN, safe="") in answer.text, "the client still gets the real answer"
    assert proxy.stored("spellings", 1)
    exported = tmp_path / "spellings.jsonl"
    done = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "export", "spellings"]
        + ["--data-dir", str(proxy.data_dir), "-o", str(exported)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = exported.read_text()
    assert "[redacted:" in text
    for secret in SECRETS:
        for spelling in spellings(secret):
            assert spelling not in text, spelling
    line = json.loads(text.splitlines()[1])
    stored = dict(line["request"]["headers"])
    assert stored["x-goog-api-key"].startswith("[redacted:")
    assert stored["referer"].endswith("&tab=2") and "key=[redacted:" in stored["referer"]
    assert "grant_type=password&username=ada&password=" in line["request"]["body"]["text"]


def test_the_proxys_credential_never_reaches_the_origin(proxy: ProxyProcess, origin: Echo) -> None:
    send(proxy, origin)
    (received,) = origin.received
    assert "proxy-authorization" not in received
    assert received["x-goog-api-key"] == GOOG_KEY, "the origin's own credentials go through"
