"""Record with the upstream up, replay with it unreachable: the clients must not notice.

Real clients (the official SDKs, httpx, requests) through ``HTTPS_PROXY`` against a
local HTTPS upstream that speaks the providers' wire formats, and a real
``freezeframe run`` subprocess in between.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import requests
from support.database import stored_bodies
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
OPENAI_KEY = "sk-e2e-openai-0123456789abcdefghij"
ANTHROPIC_KEY = "sk-ant-e2e-0123456789abcdefghijkl"


def agent(base: str, *, prompt: str = "What is 2+2?", user: str = "alice") -> list[Any]:
    """A small agent: every kind of call an agent makes, in a fixed order."""
    seen: list[Any] = []
    with openai.OpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0) as oai:
        completion = oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": prompt}],
            user=user,
            metadata={"trace": user},
        )
        seen.append(completion.model_dump())
        stream = oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        )
        seen.append([chunk.model_dump() for chunk in stream])
        with anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0) as claude:
            message = claude.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=64,
                messages=[{"role": "user", "content": prompt}],
            )
            seen.append(message.model_dump())
            with claude.messages.stream(
                model="claude-sonnet-5-5",
                max_tokens=64,
                messages=[{"role": "user", "content": prompt}],
            ) as events:
                seen.append([event.model_dump() for event in events])
            with httpx.Client(timeout=10) as client:
                seen.append(client.get(f"{base}/tool/counter", params={"q": "x"}).json())
                seen.append(client.get(f"{base}/tool/counter", params={"q": "x"}).json())
                seen.append(client.get(f"{base}/gzip").json())
            seen.append(
                requests.post(f"{base}/tool/counter", json={"op": "sum"}, timeout=10).json()
            )
            seen.append(requests.delete(f"{base}/tool/records/42", timeout=10).json())
            return seen


def test_agent_replays_byte_identical_with_no_upstream_connection(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record", cassette="agent")
    client_env(recorder)
    recorded = agent(upstream.base_url)
    assert upstream.deleted == ["42"]
    assert recorder.stop() == 0

    upstream.reset_counters()
    replayer = start_proxy(mode="replay", cassette="agent")
    client_env(replayer)
    replayed = agent(upstream.base_url, user="bob")

    assert replayed == recorded
    assert upstream.connections == 0, "replay opened a connection to the upstream"
    assert upstream.requests == []
    assert upstream.deleted == [], "replay re-invoked a destructive tool"


def test_replay_works_with_the_upstream_gone(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = agent(upstream.base_url)
    recorder.stop()
    base = upstream.base_url
    upstream.stop()

    replayer = start_proxy(mode="replay")
    client_env(replayer)
    assert agent(base) == recorded


def test_identical_requests_replay_in_recorded_order_then_miss(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    url = f"{upstream.base_url}/tool/counter"
    live = [httpx.get(url).json()["count"] for _ in range(3)]
    assert live == [1, 2, 3]
    recorder.stop()

    upstream.reset_counters()
    replayer = start_proxy(mode="replay")
    client_env(replayer)
    with httpx.Client() as client:
        assert [client.get(url).json()["count"] for _ in range(3)] == [1, 2, 3]
        exhausted = client.get(url)
    assert exhausted.status_code == 404
    assert exhausted.headers["x-should-retry"] == "false"
    error = exhausted.json()["error"]
    assert error["type"] == "freezeframe_replay_miss"
    assert "recorded 3 time(s)" in error["message"]
    assert upstream.connections == 0

    replayer.admin("PUT", "/api/mode", json={"mode": "replay"})
    assert httpx.get(url).json()["count"] == 1, "a mode switch starts replay from the top"


def test_volatile_fields_and_run_context_do_not_miss_but_a_new_prompt_does(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def ask(prompt: str, user: str, run_id: str) -> Any:
        with openai.OpenAI(
            base_url=f"{upstream.base_url}/v1",
            api_key=OPENAI_KEY,
            default_headers={"X-Freezeframe-Run-Id": run_id},
        ) as client:
            return client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": prompt}],
                user=user,
                metadata={"session": run_id},
            )

    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = ask("Summarise the report", "alice", "run-1")
    assert upstream.requests[-1].header("x-freezeframe-run-id") is None, "header reached upstream"
    recorder.stop()

    replayer = start_proxy(mode="replay", args=("--miss-details",))
    client_env(replayer)
    assert ask("Summarise the report", "bob", "run-2") == recorded

    with pytest.raises(openai.NotFoundError) as miss:
        ask("Summarise the other report", "bob", "run-2")
    body = miss.value.body
    assert isinstance(body, dict)
    assert body["type"] == "freezeframe_replay_miss"
    nearest = body["nearest"][0]
    assert [d["path"] for d in nearest["differences"]] == ["$.messages[0].content"]
    assert "Summarise the other report" in nearest["differences"][0]["live"]
    assert replayer.log.count("replay miss") == 1, "the SDK retried a miss"


def test_secrets_reach_no_stored_byte_log_or_output(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Any,
) -> None:
    recorder = start_proxy(mode="record", cassette="secrets")
    client_env(recorder)
    agent(upstream.base_url)
    httpx.get(
        f"{upstream.base_url}/tool/counter",
        params={"api_key": "tool-secret-value-123"},
        headers={"Cookie": "session=cookie-secret-456"},
    )
    recorder.stop()

    shown = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "show",
            "secrets",
            "0",
            "--json",
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        check=True,
    ).stdout
    assert b"[redacted:" in shown
    secrets = [OPENAI_KEY, ANTHROPIC_KEY, "tool-secret-value-123", "cookie-secret-456"]
    everything = [p.read_bytes() for p in data_dir.rglob("*") if p.is_file()]
    everything += stored_bodies(data_dir / "freezeframe.db")  # compressed, some as deltas
    everything += [recorder.log.encode(), shown]
    echoed = [blob for blob in everything if b'"echo":{"api_key":' in blob]
    assert echoed and all(b'"api_key":"[r:' in blob for blob in echoed), "echo not scrubbed"
    for secret in secrets:
        assert not any(secret.encode() in blob for blob in everything), secret


def test_a_secret_inside_a_compressed_body_is_not_stored(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Any,
) -> None:
    body = json.dumps({"tool": "deploy", "token": OPENAI_KEY}).encode()
    recorder = start_proxy(mode="record", cassette="compressed")
    client_env(recorder)
    sent = httpx.post(
        f"{upstream.base_url}/tool/counter",
        content=gzip.compress(body),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=10,
    )
    assert sent.status_code == 200
    recorder.stop()

    stored = stored_bodies(data_dir / "freezeframe.db")
    unzipped = [gzip.decompress(blob) for blob in stored if blob.startswith(b"\x1f\x8b")]
    assert unzipped, "the request body is stored gzip-encoded, as it was sent"
    assert not any(OPENAI_KEY.encode() in blob for blob in stored + unzipped)
    assert any(b'"token": "[r' in blob for blob in unzipped), "a marker stands in its place"
    assert "stored re-encoded, not byte-exact" in recorder.log

    replayer = start_proxy(mode="replay", cassette="compressed")
    client_env(replayer)
    again = httpx.post(
        f"{upstream.base_url}/tool/counter",
        content=gzip.compress(body, compresslevel=1),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=10,
    )
    assert again.json() == sent.json(), "the same request, compressed differently, still hits"


def test_curl_records_and_replays_through_https_proxy(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    def curl(env: dict[str, str]) -> bytes:
        return subprocess.run(
            [
                "curl",
                "--silent",
                "--show-error",
                "--fail-with-body",
                "--max-time",
                "20",
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "--data",
                '{"tool": "lookup", "id": 7}',
                f"{upstream.base_url}/tool/counter",
            ],
            env=env,
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout

    recorder = start_proxy(mode="record")
    recorded = curl({"PATH": "/usr/bin:/bin", **client_env(recorder)})
    assert b'"count": 1' in recorded or b'"count":1' in recorded
    recorder.stop()

    upstream.reset_counters()
    replayer = start_proxy(mode="replay")
    assert curl({"PATH": "/usr/bin:/bin", **client_env(replayer)}) == recorded
    assert upstream.connections == 0


def test_a_request_sent_as_recorded_is_answered_by_its_bytes_before_the_rules_key_it(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    tmp_path: Path,
) -> None:
    """storage.sent through the real proxy: the request sent again byte for byte (another
    API key aside) is answered by its recording although a rule added since would key it
    apart; the same question re-spaced is keyed in full, under the new rule, and misses."""
    recorder = start_proxy(mode="record")
    client_env(recorder)
    url = f"{upstream.base_url}/tool/counter"
    tenant = {"x-tenant-id": "acme", "content-type": "application/json"}
    sent = b'{"op": "sum", "args": [1, 2]}'
    auth = {"authorization": "Bearer sk-e2e-recorded-0123456789abcdef"}
    assert httpx.post(url, content=sent, headers={**tenant, **auth}).json()["count"] == 1
    assert recorder.stop() == 0
    upstream.reset_counters()

    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nkey_headers = ["x-tenant-id"]\n')
    replayer = start_proxy(mode="replay", args=("--rules", str(rules)))
    client_env(replayer)
    other_key = {"authorization": "Bearer sk-e2e-replayed-0123456789abcdef"}
    same = httpx.post(url, content=sent, headers={**tenant, **other_key})
    assert (same.status_code, same.json()["count"]) == (200, 1)
    respaced = httpx.post(url, content=b'{"op":"sum","args":[1,2]}', headers=tenant)
    assert respaced.status_code == 404
    assert respaced.json()["error"]["type"] == "freezeframe_replay_miss"
    assert upstream.connections == 0
