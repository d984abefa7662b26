"""Tests of the fake provider in ``upstream.py``: real SDKs and HTTP clients, no proxy.

The last section also pins down which environment variables each client library reads for
proxies and CA bundles, using :class:`ConnectTunnel` (a CONNECT proxy that only tunnels to
127.0.0.1), since the end-to-end tests drive clients through the proxy that way.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import requests
import trustme

from support.upstream import (
    RATE_LIMIT_BODY_SIZE,
    ConnectTunnel,
    Upstream,
    client_ssl_context,
    expected_bytes,
    make_ca,
    rate_limit_body,
    write_ca_pem,
)

ENV_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return make_ca()


@pytest.fixture(scope="module")
def ca_pem(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ca_pem(ca, tmp_path_factory.mktemp("ca") / "ca.pem")


@pytest.fixture(scope="module")
def ctx(ca: trustme.CA) -> ssl.SSLContext:
    return client_ssl_context(ca)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy and no CA settings inherited from the machine (this one presets CA vars)."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def up(ca: trustme.CA) -> Iterator[Upstream]:
    with Upstream(ca) as server:
        yield server
    assert server.errors == []


def _oai(up: Upstream, ctx: ssl.SSLContext, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=up.base_url + "/v1",
        api_key="sk-test",
        http_client=openai.DefaultHttpxClient(verify=ctx),
        **kw,
    )


def _ant(up: Upstream, ctx: ssl.SSLContext, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=up.base_url,
        api_key="sk-ant-test",
        http_client=anthropic.DefaultHttpxClient(verify=ctx),
        **kw,
    )


USER = [{"role": "user", "content": "what is 2+2?"}]


# --- OpenAI -------------------------------------------------------------------------------


def test_openai_chat_completion(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _oai(up, ctx) as client:
        first = client.chat.completions.create(model="gpt-test", messages=USER)  # type: ignore[arg-type]
        raw = client.chat.completions.with_raw_response.create(model="gpt-x", messages=USER)  # type: ignore[arg-type]
        second = raw.parse()
    assert first.id == "chatcmpl-1"
    assert first.object == "chat.completion"
    assert first.model == "gpt-test"
    assert first.system_fingerprint == "fp_1"
    assert first.choices[0].message.content == "answer 1 to: what is 2+2?"
    assert first.choices[0].message.role == "assistant"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens == 15
    assert second.choices[0].message.content == "answer 2 to: what is 2+2?"
    assert second.system_fingerprint == "fp_2"
    assert raw.headers["x-request-id"] == "req_2"
    assert raw.headers["content-type"] == "application/json"
    assert "openai-processing-ms" in raw.headers
    assert raw.headers["x-ratelimit-remaining-requests"] == "9998"
    sent = up.requests[0]
    assert (sent.method, sent.target) == ("POST", "/v1/chat/completions")
    assert sent.header("authorization") == "Bearer sk-test"
    assert sent.json()["messages"] == USER
    assert up.connections == 1  # the SDK's pool reused the connection


def test_openai_trusts_ca_from_ssl_cert_file(
    up: Upstream, ca_pem: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem))  # read when the client is built
    with openai.OpenAI(base_url=up.base_url + "/v1", api_key="sk-test", max_retries=0) as client:
        got = client.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
    assert got.choices[0].message.content == "answer 1 to: what is 2+2?"


def test_openai_content_parts_prompt(up: Upstream, ctx: ssl.SSLContext) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "reply"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "new "}, {"type": "text", "text": "q"}],
        },
    ]
    with _oai(up, ctx) as client:
        got = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert got.choices[0].message.content == "answer 1 to: new q"


def test_openai_stream(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _oai(up, ctx) as client:
        stream = client.chat.completions.create(model="gpt-test", messages=USER, stream=True)  # type: ignore[arg-type]
        with stream:
            chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == "chatcmpl-1" for c in chunks)
    assert all(c.system_fingerprint == "fp_1" and c.usage is None for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 4
    assert "".join(pieces) == "answer 1 to: what is 2+2?"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)


def test_openai_stream_include_usage(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _oai(up, ctx) as client:
        client.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
        stream = client.chat.completions.create(
            model="m",
            messages=USER,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        with stream:
            chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "answer 2 to: what is 2+2?"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (10, 5)
    assert all(c.usage is None for c in chunks[:-1])


def test_openai_stream_helper(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _oai(up, ctx) as client:
        with client.chat.completions.stream(model="m", messages=USER) as stream:  # type: ignore[arg-type]
            final = stream.get_final_completion()
    assert final.choices[0].message.content == "answer 1 to: what is 2+2?"


def test_openai_rate_limit_full_is_one_attempt(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _oai(up, ctx, max_retries=3) as client:
        with pytest.raises(openai.RateLimitError) as info:
            client.get(up.url("/ratelimited/full"), cast_to=object)
    assert info.value.status_code == 429
    assert "Rate limit reached for requests 1" in info.value.message
    assert len(up.requests) == 1  # x-should-retry: false


def test_openai_truncated_rate_limit_is_a_connection_error(
    up: Upstream, ctx: ssl.SSLContext
) -> None:
    """The SDK reads the body inside send(), so the cut body is a transport error that it
    retries regardless of x-should-retry: only max_retries=0 gives a single attempt."""
    with _oai(up, ctx, max_retries=0) as client:
        with pytest.raises(openai.APIConnectionError):
            client.post("/ratelimited", cast_to=object, body={})
    assert [r.target for r in up.requests] == ["/v1/ratelimited"]
    with _oai(up, ctx, max_retries=1) as client:
        with pytest.raises(openai.APIConnectionError):
            client.post("/ratelimited", cast_to=object, body={})
    assert len(up.requests) == 3


# --- Anthropic ----------------------------------------------------------------------------


def test_anthropic_create(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _ant(up, ctx) as client:
        msg = client.messages.create(model="claude-test", max_tokens=50, messages=USER)  # type: ignore[arg-type]
        raw = client.messages.with_raw_response.create(
            model="claude-test",
            max_tokens=50,
            messages=[{"role": "user", "content": [{"type": "text", "text": "blocks"}]}],
        )
    assert msg.id == "msg_1"
    assert msg.model == "claude-test"
    assert msg.stop_reason == "end_turn"
    assert msg.content[0].type == "text"
    assert msg.content[0].text == "answer 1 to: what is 2+2?"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (10, 5)
    second = raw.parse()
    assert second.content[0].type == "text" and second.content[0].text == "answer 2 to: blocks"
    assert raw.headers["request-id"] == "req_2"
    assert raw.headers["anthropic-ratelimit-requests-remaining"] == "998"
    sent = up.requests[0]
    # anthropic 2.x sends the key as a bearer token, not x-api-key
    assert "sk-ant-test" in (sent.header("authorization") or sent.header("x-api-key") or "")
    assert sent.header("anthropic-version")


def test_anthropic_stream(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _ant(up, ctx) as client:
        with client.messages.stream(model="claude-test", max_tokens=50, messages=USER) as stream:  # type: ignore[arg-type]
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        with client.messages.stream(model="claude-test", max_tokens=50, messages=USER) as stream:  # type: ignore[arg-type]
            again = stream.get_final_message()
    assert len(pieces) >= 4
    assert "".join(pieces) == "answer 1 to: what is 2+2?"
    assert final.id == "msg_1"
    assert final.content[0].type == "text" and final.content[0].text == "answer 1 to: what is 2+2?"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5
    assert again.content[0].type == "text" and again.content[0].text == "answer 2 to: what is 2+2?"


def test_anthropic_raw_stream_events(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _ant(up, ctx) as client:
        stream = client.messages.create(
            model="claude-test",
            max_tokens=50,
            messages=USER,  # type: ignore[arg-type]
            stream=True,
        )
        with stream:
            kinds = [event.type for event in stream]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}  # the SDK drops "ping"


# --- tool calls ---------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CITY = [{"role": "user", "content": "Paris"}]


def test_openai_answers_offered_tools_with_parallel_calls(
    up: Upstream, ctx: ssl.SSLContext
) -> None:
    with _oai(up, ctx) as client:
        whole = client.chat.completions.create(model="m", messages=CITY, tools=[WEATHER, TIME])  # type: ignore[arg-type, list-item]
        with client.chat.completions.stream(
            model="m",
            messages=CITY,  # type: ignore[arg-type]
            tools=[WEATHER, TIME],  # type: ignore[list-item]
        ) as stream:
            streamed = stream.get_final_completion()
        one = client.chat.completions.create(
            model="m",
            messages=CITY,  # type: ignore[arg-type]
            tools=[WEATHER, TIME],  # type: ignore[list-item]
            parallel_tool_calls=False,
        )
    for answer, n in ((whole, 1), (streamed, 2)):
        choice = answer.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
            (f"call_{n}_0", "get_weather", {"city": "Paris"}),
            (f"call_{n}_1", "get_time", {"city": "Paris"}),
        ]
    assert [c.function.name for c in one.choices[0].message.tool_calls or []] == ["get_weather"]  # type: ignore[union-attr]


def test_openai_streams_tool_arguments_a_few_characters_at_a_time(
    up: Upstream, ctx: ssl.SSLContext
) -> None:
    with _oai(up, ctx) as client:
        stream = client.chat.completions.create(
            model="m",
            messages=CITY,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            stream=True,
        )
        with stream:
            chunks = list(stream)
    pieces = [
        call.function.arguments
        for chunk in chunks
        for call in chunk.choices[0].delta.tool_calls or []
        if call.function and call.function.arguments
    ]
    assert len(pieces) > 3
    assert json.loads("".join(pieces)) == {"city": "Paris"}


def test_openai_answers_tool_results_with_text(up: Upstream, ctx: ssl.SSLContext) -> None:
    turn = [
        *CITY,
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    with _oai(up, ctx) as client:
        answer = client.chat.completions.create(model="m", messages=turn, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.content == "answer 1 to: Paris"


def test_anthropic_answers_offered_tools_with_tool_use(up: Upstream, ctx: ssl.SSLContext) -> None:
    tools = [{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}]  # type: ignore[index]
    with _ant(up, ctx) as client:
        whole = client.messages.create(model="c", max_tokens=50, messages=CITY, tools=tools)  # type: ignore[arg-type]
        with client.messages.stream(model="c", max_tokens=50, messages=CITY, tools=tools) as s:  # type: ignore[arg-type]
            kinds = [event.type for event in s]
            streamed = s.get_final_message()
        done = client.messages.create(
            model="c",
            max_tokens=50,
            tools=tools,  # type: ignore[arg-type]
            messages=[
                *CITY,  # type: ignore[list-item]
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}],
                },
            ],
        )
    for message, n in ((whole, 1), (streamed, 2)):
        assert message.stop_reason == "tool_use"
        use = message.content[0]
        assert use.type == "tool_use"
        assert (use.id, use.name, use.input) == (f"toolu_{n}_0", "get_weather", {"city": "Paris"})
    assert kinds.count("input_json") > 3  # the SDK's event for each input_json_delta
    assert done.stop_reason == "end_turn" and done.content[0].type == "text"


# --- httpx: failure modes, encodings, counters ---------------------------------------------


def test_rate_limited_partial_body(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        with client.stream("POST", up.url("/v1/ratelimited"), json={}) as response:
            assert response.status_code == 429
            assert response.reason_phrase == "Too Many Requests"
            assert response.headers["retry-after"] == "0"
            assert response.headers["x-should-retry"] == "false"
            assert response.headers["content-type"] == "application/json"
            assert response.headers["content-length"] == str(RATE_LIMIT_BODY_SIZE)
            with pytest.raises(httpx.RemoteProtocolError, match="received 120 bytes, expected 300"):
                response.read()
        # the client can carry on with a new connection
        assert client.get(up.url("/tool/counter")).json()["count"] == 1
    assert up.connections == 2


def test_rate_limited_partial_raw_bytes(ca: trustme.CA) -> None:
    with Upstream(ca, tls=False) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /v1/ratelimited HTTP/1.1\r\nHost: x\r\n\r\n")
            data = _recv_all(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n")
    assert b"\r\ncontent-length: 300" in head
    assert body == rate_limit_body(1)[:120]


def test_rate_limited_full(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        first = client.get(up.url("/ratelimited/full"))
        second = client.get(up.url("/ratelimited/full"))
    assert first.status_code == 429
    assert first.headers["retry-after"] == "0"
    assert first.headers["x-should-retry"] == "false"
    assert len(first.content) == RATE_LIMIT_BODY_SIZE
    err = first.json()["error"]
    assert err["code"] == "rate_limit_exceeded" and err["type"] == "requests"
    assert err["message"].startswith("Rate limit reached for requests 1 ")
    assert second.json()["error"]["message"].startswith("Rate limit reached for requests 2 ")
    assert up.connections == 1


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_reset_midstream(ca: trustme.CA, ctx: ssl.SSLContext, tls: bool) -> None:
    with Upstream(ca, tls=tls) as server, httpx.Client(verify=ctx) as client:
        with client.stream("GET", server.url("/reset-midstream")) as response:
            assert response.status_code == 200
            assert response.headers["transfer-encoding"] == "chunked"
            # Over TLS the RST may surface as a ragged EOF (protocol error) or a reset.
            with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                response.read()


def test_reset_midstream_is_a_tcp_reset(ca: trustme.CA) -> None:
    with Upstream(ca, tls=False) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /reset-midstream HTTP/1.1\r\nHost: x\r\n\r\n")
            with pytest.raises(ConnectionResetError):
                _recv_all(sock)


def test_gzip(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        first = client.get(up.url("/gzip"))
        second = client.get(up.url("/gzip"))
    assert first.headers["content-encoding"] == "gzip"
    assert int(first.headers["content-length"]) < len(first.content)
    assert first.json()["n"] == 1 and first.json()["gzip"] is True
    assert second.json()["n"] == 2


def test_keep_alive_counts_one_connection(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        client.get(up.url("/tool/counter"))
        client.get(up.url("/tool/counter"))
    assert up.connections == 1
    assert len(up.requests) == 2
    with httpx.Client(verify=ctx) as client:
        client.get(up.url("/tool/counter"))
    assert up.connections == 2
    assert len(up.requests) == 3


def test_connection_counted_before_tls(up: Upstream) -> None:
    with socket.create_connection(("127.0.0.1", up.port), timeout=5):
        pass
    _wait_for(lambda: up.connections == 1)
    assert up.requests == []


def test_reset_counters(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        client.get(up.url("/tool/counter"))
        client.delete(up.url("/tool/records/a"))
        up.reset_counters()
        assert (up.connections, up.requests, up.deleted) == (0, [], [])
        assert client.get(up.url("/tool/counter")).json()["count"] == 2  # answers keep changing
        assert up.connections == 0  # same pooled connection, accepted before the reset
        up.reset_counters(endpoints=True)
        assert client.get(up.url("/tool/counter")).json()["count"] == 1


def test_counter_echo_and_delete(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        got = client.get(up.url("/tool/counter?q=1&x=y")).json()
        posted = client.post(up.url("/tool/counter"), json={"a": [1, 2]}).json()
        d1 = client.delete(up.url("/tool/records/rec-1")).json()
        d2 = client.delete(up.url("/tool/records/rec-2")).json()
        missing = client.get(up.url("/nowhere"))
    assert got == {"count": 1, "echo": {"q": "1", "x": "y"}}
    assert posted == {"count": 2, "echo": {"a": [1, 2]}}
    assert (d1["deleted"], d2["deleted"]) == ("rec-1", "rec-2")
    assert d1["remaining"] == d2["remaining"] + 1
    assert up.deleted == ["rec-1", "rec-2"]
    assert missing.status_code == 404 and missing.json()["n"] == 1


def test_sse_slow(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        start = time.monotonic()
        with client.stream("GET", up.url("/sse/slow?events=4&gap_ms=60")) as response:
            assert response.headers["content-type"] == "text/event-stream"
            lines = [line for line in response.iter_lines() if line]
        elapsed = time.monotonic() - start
        default = client.get(up.url("/sse/slow")).text
    assert lines == [f'data: {{"i": {k}, "n": 1}}' for k in range(4)]
    assert elapsed >= 0.17
    assert default.count("data: ") == 5 and '"n": 2' in default


def test_stream_gaps_configurable(ca: trustme.CA, ctx: ssl.SSLContext) -> None:
    body = {"model": "m", "messages": USER, "stream": True}
    with Upstream(ca, stream_gaps=[0.0, 0.4, 0.0]) as server, httpx.Client(verify=ctx) as client:
        stamps = []
        with client.stream("POST", server.url("/v1/chat/completions"), json=body) as response:
            for line in response.iter_lines():
                if line:
                    stamps.append(time.monotonic())
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert gaps[1] >= 0.35  # the second gap
    assert max(gaps[:1] + gaps[2:]) < 0.3


def test_each_sse_event_is_its_own_chunk(ca: trustme.CA) -> None:
    body = json.dumps({"model": "m", "messages": USER, "stream": True}).encode()
    request = (
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with Upstream(ca, tls=False) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(request)
            data = _recv_all(sock)
    head, _, rest = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    chunks = []
    for _ in range(1000):
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]
    assert all(
        c.startswith(b"event: ") and c.endswith(b"\n\n") and c.count(b"\n\n") == 1 for c in chunks
    )
    assert [c.split(b"\n")[0] for c in chunks][:3] == [
        b"event: message_start",
        b"event: content_block_start",
        b"event: ping",
    ]


def test_bytes(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        big = client.get(up.url("/bytes?size=300000"))
        small = client.get(up.url("/bytes?size=5"))
    assert big.headers["content-type"] == "application/octet-stream"
    assert big.content == expected_bytes(300000, 1)
    assert big.content[:16] == b"n=00000000000001"
    assert small.content == b"n=000"


def test_stop_closes_open_connections(ca: trustme.CA, ctx: ssl.SSLContext) -> None:
    server = Upstream(ca).start()
    try:
        with httpx.Client(verify=ctx) as client:
            with client.stream("GET", server.url("/sse/slow?events=100&gap_ms=100")) as response:
                chunks = response.iter_raw()
                assert b'"i": 0' in next(chunks)
                start = time.monotonic()
                server.stop()
                assert time.monotonic() - start < 5
                with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                    for _ in chunks:
                        pass
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    finally:
        server.stop()
        server.stop()  # idempotent


def test_bad_json_is_400(up: Upstream, ctx: ssl.SSLContext) -> None:
    with httpx.Client(verify=ctx) as client:
        response = client.post(up.url("/v1/chat/completions"), content=b"{nope")
    assert response.status_code == 400


# --- requests -----------------------------------------------------------------------------


def test_requests_counter(up: Upstream, ca_pem: Path) -> None:
    first = requests.get(up.url("/tool/counter"), verify=str(ca_pem), timeout=5)
    second = requests.get(up.url("/tool/counter"), verify=str(ca_pem), timeout=5)
    assert (first.json()["count"], second.json()["count"]) == (1, 2)


# --- what each client reads from the environment -------------------------------------------


@pytest.fixture
def tunnel() -> Iterator[ConnectTunnel]:
    with ConnectTunnel() as t:
        yield t


def _call(client: str, up: Upstream) -> str:
    """One request to ``up`` with the named client, configured only by the environment."""
    if client == "openai":
        with openai.OpenAI(base_url=up.base_url + "/v1", api_key="k", max_retries=0) as c:
            got = c.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
            return got.choices[0].message.content or ""
    if client == "anthropic":
        with anthropic.Anthropic(base_url=up.base_url, api_key="k", max_retries=0) as a:
            msg = a.messages.create(model="m", max_tokens=5, messages=USER)  # type: ignore[arg-type]
            block = msg.content[0]
            return block.text if block.type == "text" else ""
    if client == "httpx":
        with httpx.Client() as h:
            return str(h.get(up.url("/tool/counter")).json()["count"])
    with requests.Session() as s:
        return str(s.get(up.url("/tool/counter"), timeout=5).json()["count"])


CLIENTS = ["openai", "anthropic", "httpx", "requests"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("var", "no_proxy"),
    [("HTTPS_PROXY", None), ("https_proxy", None), ("HTTPS_PROXY", "127.0.0.1")],
    ids=["upper", "lower", "no_proxy-ip-does-not-cover-localhost"],
)
def test_env_https_proxy_is_used_for_localhost(
    client: str,
    var: str,
    no_proxy: str | None,
    up: Upstream,
    tunnel: ConnectTunnel,
    ca_pem: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(var, tunnel.url)
    if no_proxy is not None:  # matched against the URL's host name, never resolved
        monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca_pem))
    assert _call(client, up)
    assert tunnel.connects == [f"localhost:{up.port}"]  # localhost is NOT bypassed by default
    assert up.connections == 1


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("no_proxy", ["localhost,127.0.0.1", "*"])
def test_env_no_proxy_bypasses(
    client: str,
    no_proxy: str,
    up: Upstream,
    tunnel: ConnectTunnel,
    ca_pem: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca_pem))
    assert _call(client, up)
    assert tunnel.connects == []
    assert up.connections == 1


@pytest.mark.parametrize(
    ("client", "var", "works"),
    [
        ("openai", "SSL_CERT_FILE", True),
        ("openai", "REQUESTS_CA_BUNDLE", False),
        ("anthropic", "SSL_CERT_FILE", True),
        ("anthropic", "REQUESTS_CA_BUNDLE", False),
        ("httpx", "SSL_CERT_FILE", True),
        ("httpx", "REQUESTS_CA_BUNDLE", False),
        ("requests", "REQUESTS_CA_BUNDLE", True),
        ("requests", "CURL_CA_BUNDLE", True),
        ("requests", "SSL_CERT_FILE", False),
    ],
)
def test_env_ca_bundle(
    client: str,
    var: str,
    works: bool,
    up: Upstream,
    ca_pem: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(var, str(ca_pem))
    if works:
        assert _call(client, up)
        return
    errors = (
        openai.APIConnectionError,
        anthropic.APIConnectionError,
        httpx.ConnectError,
        requests.exceptions.SSLError,
    )
    with pytest.raises(errors):
        _call(client, up)
    assert up.requests == []


def test_env_ca_through_tunnel_needs_same_ca(
    up: Upstream, tunnel: ConnectTunnel, ca_pem: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a CONNECT proxy the target's certificate is still checked against the env CA."""
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    with pytest.raises(openai.APIConnectionError):
        _call("openai", up)  # no SSL_CERT_FILE: system store, which lacks the trustme CA
    assert tunnel.connects == [f"localhost:{up.port}"]
    assert up.requests == []


def test_tunnel_refuses_other_hosts(tunnel: ConnectTunnel) -> None:
    with socket.create_connection(("127.0.0.1", tunnel.port), timeout=5) as sock:
        sock.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        assert _recv_all(sock).startswith(b"HTTP/1.1 403")
    assert tunnel.connects == ["example.com:443"]


# --- helpers ------------------------------------------------------------------------------


def _recv_all(sock: socket.socket, limit: int = 10_000_000) -> bytes:
    data = b""
    for _ in range(100_000):
        piece = sock.recv(65536)
        if not piece or len(data) > limit:
            break
        data += piece
    return data


def _wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def test_environment_is_clean() -> None:
    assert not any(os.environ.get(name) for name in ENV_VARS)


def test_anthropic_rate_limits(up: Upstream, ctx: ssl.SSLContext) -> None:
    with _ant(up, ctx, max_retries=1) as client:
        with pytest.raises(anthropic.APIConnectionError):
            client.post("/v1/ratelimited", cast_to=object, body={})
        assert len(up.requests) == 2  # the cut body is retried like any transport error
        with pytest.raises(anthropic.RateLimitError):
            client.post("/ratelimited/full", cast_to=object, body={})
        assert len(up.requests) == 3  # x-should-retry: false
