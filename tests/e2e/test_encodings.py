"""Content encodings cross the proxy untouched, and never change what a request is keyed by.

For each of gzip, br, zstd and deflate the upstream answers with that Content-Encoding;
the recording must hold the bytes as they were sent (not decoded, not re-encoded), and
replay must send those same bytes under the same headers, so a client that decodes gets
what the upstream meant and one that does not gets the very same bytes. A request body
is the other way round: it is forwarded as sent, but keyed by what it decodes to, so the
same JSON compressed differently is the same request.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from support.proxy import ProxyProcess
from support.upstream import ENCODERS, Upstream, encoded_body

from freezeframe.storage import Exchange, open_store

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
CODINGS = ("gzip", "br", "zstd", "deflate")
#: The feature ``curl -V`` lists when that build can decode a coding.
CURL_FEATURE = {"gzip": "libz", "deflate": "libz", "br": "brotli", "zstd": "zstd"}
TIMEOUT = 10.0


def read_raw(url: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and the body bytes exactly as they arrived, never decoded."""
    with httpx.stream("GET", url, timeout=TIMEOUT) as response:
        assert response.status_code == 200, response.read()
        return response.headers.raw, b"".join(response.iter_raw())


def curl_decodes(coding: str) -> bool:
    version = subprocess.run(["curl", "-V"], capture_output=True, text=True, timeout=TIMEOUT)
    features = next(
        (line for line in version.stdout.splitlines() if line.startswith("Features:")), ""
    )
    return CURL_FEATURE[coding] in features.split()


def curl_decoded(url: str) -> bytes:
    """What curl --compressed (which decodes all four codings itself) prints."""
    return subprocess.run(
        ["curl", "--silent", "--show-error", "--fail", "--compressed", "--max-time", "10", url],
        capture_output=True,
        check=True,
        timeout=TIMEOUT + 5,
    ).stdout


def shown(data_dir: Path, *args: str) -> Any:
    """What ``freezeframe show default <args> --json`` prints, parsed."""
    result = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "show", "default", *args, "--json"]
        + ["--data-dir", str(data_dir)],
        capture_output=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    return json.loads(result.stdout)


def body_of(document: dict[str, Any]) -> bytes:
    body = document["body"]
    return base64.b64decode(body["base64"]) if "base64" in body else body["text"].encode()


def stored(data_dir: Path) -> list[Exchange]:
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        return [store.exchange("default", row.seq) for row in store.exchanges("default")]


def header(fields: Sequence[tuple[bytes, bytes]], name: str) -> str | None:
    return next((v.decode() for k, v in fields if k.lower() == name.encode()), None)


@pytest.mark.parametrize("coding", CODINGS)
def test_an_encoded_answer_is_stored_raw_and_replayed_raw_under_the_same_headers(
    coding: str,
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    if not curl_decodes(coding):
        pytest.skip(f"this curl cannot decode {coding} (see curl -V)")
    url = f"{upstream.base_url}/encoded/{coding}"
    recorder = start_proxy(mode="record")
    client_env(recorder)
    headers, raw = read_raw(url)
    decoded_by_curl = curl_decoded(url)
    decoded_by_requests = requests.get(url, timeout=TIMEOUT)
    recorder.stop()

    sent = [encoded_body(coding, n) for n in (1, 2, 3)]
    assert raw == sent[0][0], "the proxy changed the encoded bytes on their way through"
    assert (b"content-encoding", coding.encode()) in headers
    assert json.loads(decoded_by_curl) == json.loads(sent[1][1])
    assert decoded_by_requests.json() == json.loads(sent[2][1])
    shown_response = shown(data_dir, "0")["response"]
    assert body_of(shown_response) == sent[0][0], "show did not print the bytes as sent"
    assert ["content-encoding", coding] in shown_response["headers"]
    kept = [exchange.recorded.response for exchange in stored(data_dir)]
    assert [r.body if r else None for r in kept] == [wire for wire, _ in sent]
    assert {header(r.headers, "content-encoding") if r else None for r in kept} == {coding}

    connections = upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert read_raw(url) == (headers, raw)
    assert curl_decoded(url) == decoded_by_curl
    replayed = requests.get(url, timeout=TIMEOUT)
    assert replayed.content == decoded_by_requests.content
    assert replayed.headers["content-encoding"] == coding
    assert upstream.connections == connections, "replay reached the upstream"


def test_a_compressed_request_body_is_forwarded_as_sent_and_keyed_by_what_it_decodes_to(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    payload = json.dumps({"query": "cats", "limit": 5, "tags": ["a"] * 40}).encode()
    url = f"{upstream.base_url}/tool/counter"

    def post(client: httpx.Client, coding: str) -> Any:
        headers = {"Content-Type": "application/json"}
        if coding != "identity":
            headers["Content-Encoding"] = coding
        response = client.post(url, content=ENCODERS[coding](payload), headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = []
    with httpx.Client(timeout=TIMEOUT) as client:
        for coding in ("identity", *CODINGS):
            recorded.append(post(client, coding))
            seen = upstream.requests[-1]
            assert seen.body == ENCODERS[coding](payload), f"{coding} body was not sent as is"
            assert seen.header("content-encoding") == (None if coding == "identity" else coding)
    recorder.stop()
    assert [answer["count"] for answer in recorded] == [1, 2, 3, 4, 5]
    rows = shown(data_dir)
    assert len({row["key"] for row in rows}) == 1, "one JSON, compressed five ways, is one key"
    assert [row["occurrence"] for row in rows] == [0, 1, 2, 3, 4]
    for exchange, coding in zip(stored(data_dir), ("identity", *CODINGS), strict=True):
        assert exchange.recorded.request_body == ENCODERS[coding](payload), "not stored as sent"

    connections = upstream.connections
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client(timeout=TIMEOUT) as client:
        # Each coding now asks for a recording made with another one: all five are one key.
        replayed = [post(client, coding) for coding in (*CODINGS, "identity")]
    assert replayed == recorded
    assert upstream.connections == connections, "replay reached the upstream"


def test_a_secret_in_a_compressed_answer_to_a_resent_request_is_never_stored(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
    upstream_ca_file: Path,
) -> None:
    """``resend`` stores its live answer as the proxy stores one: a secret the answer carries
    inside its gzip is redacted, and the body is stored encoded again."""
    proxy = start_proxy(mode="record")
    client_env(proxy)
    with httpx.Client(timeout=TIMEOUT) as client:
        asked = client.post(upstream.url("/encoded/gzip"), json={"q": "plain"})
        assert asked.status_code == 200 and "plain" in asked.json()["echo"]
    proxy.stop()
    secret = "sk-proj-" + "a1B2c3D4" * 6
    resent = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "resend", "default", "0", "--into", "resent"]
        + ["--set", f'$.q="{secret}"', "--upstream-ca", str(upstream_ca_file)]
        + ["--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert resent.returncode == 0, resent.stderr
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        exchange = store.exchange("resent", 0)
    assert exchange.recorded.response is not None
    assert header(exchange.recorded.response.headers, "content-encoding") == "gzip"
    answer = gzip.decompress(exchange.recorded.response.body)
    assert json.loads(answer)["coding"] == "gzip", "the answer is the live one, readable"
    assert b"[redacted:" in answer and secret.encode() not in answer
    assert secret.encode() not in exchange.recorded.request_body
