"""addons._flows and addons.context: what freezeframe learns of a flow before anyone keys it."""

from __future__ import annotations

import gzip
import json
import logging

import pytest
from mitmproxy import http
from support.addon_chain import KEY, TOKEN, Answer, Chain, request

from freezeframe.addons import Routing, RuntimeState
from freezeframe.addons._flows import (
    canonical_of,
    display_url,
    info_of,
    recorded_response,
    response_from,
)
from freezeframe.addons.context import RequestContext
from freezeframe.addons.state import Mode
from freezeframe.canonicalize import KeyConfig
from freezeframe.storage import Store
from freezeframe.storage.encodings import HELD_DECODED
from freezeframe.storage.redaction import Redactor

REDACTOR = Redactor(KEY)


def context(mode: Mode = Mode.RECORD) -> RequestContext:
    return RequestContext(RuntimeState(mode, "default"), REDACTOR, Routing())


def test_freezeframe_headers_are_read_stripped_and_secrets_redacted() -> None:
    flow = request(
        url=f"https://api.example.com:8443/v1/items?api_key={TOKEN}&page=2",
        headers=[
            ("X-Freezeframe-Cassette", " runs "),
            ("x-freezeframe-run-id", f"run {TOKEN}"),
            ("x-freezeframe-flags", "a,b"),
        ],
    )
    context().requestheaders(flow)

    info = info_of(flow)
    assert info is not None and info.cassette == "runs" and info.mode is Mode.RECORD
    assert not any(name.lower().startswith("x-freezeframe") for name in flow.request.headers)
    assert info.context["flags"] == "a,b" and TOKEN not in info.context["run-id"]
    assert TOKEN not in info.target and "page=2" in info.target
    assert all(TOKEN.encode() not in value for _, value in info.request_headers)
    assert TOKEN.encode() in info.secrets
    assert display_url(flow, info).startswith("https://api.example.com:8443/v1/items?api_key=")


def test_a_bad_cassette_name_is_answered_400_and_never_forwarded() -> None:
    flow = request(headers=[("x-freezeframe-cassette", "../../etc/passwd")])
    context().requestheaders(flow)

    assert info_of(flow) is None and flow.response is not None
    assert flow.response.status_code == 400
    assert json.loads(flow.response.content or b"")["error"]["type"] == "freezeframe_bad_cassette"


def test_a_compressed_request_is_keyed_by_what_it_says() -> None:
    body = json.dumps({"model": "m", "input": "hi"}).encode()
    plain = request("POST", body=body, headers=[("content-type", "application/json")])
    packed = request(
        "POST",
        body=gzip.compress(body),
        headers=[("content-type", "application/json"), ("content-encoding", "gzip")],
    )
    keys = []
    for flow, sent in ((plain, body), (packed, gzip.compress(body))):
        context().requestheaders(flow)
        flow.request.data.content = sent
        info = info_of(flow)
        assert info is not None
        canonical = canonical_of(flow, info, KeyConfig(), REDACTOR)
        assert canonical_of(flow, info, KeyConfig(), REDACTOR) is canonical  # once per flow
        assert info.body is not None and info.body.keyed == body
        assert info.body.stored == sent  # stored as it was sent: nothing in it to redact
        keys.append(canonical.key)

    assert keys[0] == keys[1]


def test_a_body_that_decodes_past_the_limit_is_keyed_as_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bomb = gzip.compress(b"\0" * (HELD_DECODED + 1))
    flow = request("POST", body=bomb, headers=[("content-encoding", "gzip")])
    context().requestheaders(flow)
    flow.request.data.content = bomb
    info = info_of(flow)
    assert info is not None

    with caplog.at_level(logging.WARNING, "freezeframe.proxy"):
        canonical_of(flow, info, KeyConfig(), REDACTOR)
    assert info.body is not None and info.body.keyed == bomb
    assert "body keyed as sent" in caplog.text


def test_the_stored_response_keeps_the_upstream_headers_and_drops_secrets() -> None:
    flow = request()
    context().requestheaders(flow)
    info = info_of(flow)
    assert info is not None
    flow.response = http.Response.make(
        200, b"{}", {"set-cookie": f"session={TOKEN}", "x-echo": TOKEN}
    )
    stored = recorded_response(flow, info, b"{}", None, ((0, 0.01),), REDACTOR)

    headers = dict(stored.headers)
    assert TOKEN.encode() not in headers[b"set-cookie"] and TOKEN.encode() not in headers[b"x-echo"]
    served = response_from(stored, ((b"x-a", b"1"),))
    assert served.raw_content == b"{}" and served.headers.fields == ((b"x-a", b"1"),)


@pytest.mark.asyncio
async def test_a_compressed_request_with_a_secret_is_stored_re_encoded(store: Store) -> None:
    body = gzip.compress(json.dumps({"key": TOKEN}).encode())
    headers = [("content-type", "application/json"), ("content-encoding", "gzip")]
    async with Chain(store) as chain:
        await chain.send(request("POST", body=body, headers=headers), [body], Answer())
    store.flush(10)

    stored = store.exchange("default", 0)
    assert TOKEN.encode() not in gzip.decompress(stored.recorded.request_body)
    assert stored.recorded.facts == {} or all(
        TOKEN not in str(v) for v in stored.recorded.facts.values()
    )
