"""The replay kit: drift made loud, annotations, per-exchange metadata, filters and rekey.

Each test records real SDK traffic through a real proxy, then reads what the user reads:
response headers, the proxy's log, and `freezeframe show` / `ls` / `rekey` output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from click.testing import CliRunner
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream

from freezeframe import cli

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
MESSAGES = [{"role": "user", "content": "What should I do next?"}]


def freezeframe(data_dir: Path, *args: str) -> Any:
    """Run a command the way a user would and return its --json document."""
    result = CliRunner().invoke(cli.main, [*args, "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return json.loads(result.stdout)


def chat(base: str, *, run: str, **extra: Any) -> tuple[httpx.Headers, Any]:
    """The answer's headers and its parsed completion."""
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_headers={"X-Freezeframe-Run-Id": run},
            **extra,
        )
        return raw.headers, raw.parse()


def test_a_hit_whose_stripped_fields_changed_is_served_and_reported_as_drift(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    _, recorded = chat(upstream.base_url, run="rec", user="alice", metadata={"team": "a"})
    recorder.stop()

    replayer = start_proxy(mode="replay", env={"FREEZEFRAME_ANNOTATE": "1"})
    client_env(replayer)
    same, _ = chat(upstream.base_url, run="r1", user="alice", metadata={"team": "a"})
    assert same["x-freezeframe-hit"] == "default#0"
    assert "x-freezeframe-drift" not in same
    replayer.admin("POST", "/api/replay/reset")
    drifted, answer = chat(upstream.base_url, run="r2", user="bob", metadata={"team": "a"})
    assert answer.model_dump() == recorded.model_dump()
    assert drifted["x-freezeframe-drift"] == "body:$.user"
    assert upstream.connections == 1
    replayer.stop()
    assert "drifted from the recording in body:$.user" in replayer.log

    listing = freezeframe(data_dir, "show", "default")
    assert [row["drifted"] for row in listing] == [1]
    exchange = freezeframe(data_dir, "show", "default", "0")
    [note] = exchange["drift"]
    assert note["paths"] == ["body:$.user"] and note["context"]["run-id"] == "r2"
    shown = CliRunner().invoke(cli.main, ["show", "default", "0", "--data-dir", str(data_dir)])
    assert "drifted on replay" in shown.stdout and "body:$.user" in shown.stdout
    assert "model: gpt-4o-mini" in shown.stdout


IGNORING_METADATA = """
[[rule]]
host = "localhost"
path = "/v1/chat/completions"
ignore = ["$.metadata"]
"""
ASKING = textwrap.dedent(
    """
    import sys, openai
    with openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0) as c:
        c.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "What should I do next?"}],
            metadata={"tier": "enterprise", "user_token": sys.argv[2]},
        )
    """
)


def test_a_hit_whose_ignored_field_carries_something_new_names_the_field_and_both_values(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
    tmp_path: Path,
    upstream_ca_file: Path,
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(IGNORING_METADATA)
    recorder = start_proxy(mode="record", args=("--rules", str(rules)))
    client_env(recorder)
    chat(upstream.base_url, run="rec", metadata={"tier": "free"})
    recorder.stop()
    secret = "sk-proj-" + "Q7xR" * 10  # in the ignored field now: redacted wherever shown

    # The hit's event in the admin API: the field, what the recording had, what came.
    replayer = start_proxy(mode="replay", args=("--rules", str(rules)))
    client_env(replayer)
    chat(upstream.base_url, run="r1", metadata={"tier": "enterprise", "user_token": secret})
    events = replayer.admin("GET", "/api/events").json()["events"]
    replayer.stop()
    [hit] = [event for event in events if event["kind"] == "hit"]
    assert hit["drift"] == ["body:$.metadata"]
    [value] = hit["drift_values"]
    assert (value["path"], value["recorded"]) == ("body:$.metadata", '{"tier":"free"}')
    assert value["live"].startswith('{"tier":"enterprise","user_token":"[redacted:')
    assert secret not in json.dumps(events) and secret not in replayer.log
    assert upstream.connections == 1

    # exec's summary says the same, in one line.
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    done = subprocess.run(
        [
            sys.executable, "-P", "-m", "freezeframe", "exec",
            "--data-dir", str(data_dir),
            "--mode", "replay",
            "--rules", str(rules),
            "--listen", f"127.0.0.1:{free_port()}",
            "--admin", f"127.0.0.1:{free_port()}",
            "--replay-pace", "instant",
            "--", sys.executable, "-c", ASKING, upstream.base_url, secret,
        ],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2], env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "drifted:" in line]
    assert line.startswith(
        f"freezeframe: default: drifted: POST {upstream.base_url}/v1/chat/completions "
        'replayed #0: body:$.metadata (recorded {"tier":"free"}, live {"tier":"enterprise",'
    )
    assert secret not in done.stderr + done.stdout
    assert upstream.connections == 1


def test_annotations_are_off_unless_asked_and_never_recorded(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    auto = start_proxy(mode="auto", env={"FREEZEFRAME_ANNOTATE": "1"})
    client_env(auto)
    first = httpx.get(f"{upstream.base_url}/tool/counter?q=1", timeout=10)
    assert first.headers["x-freezeframe-recorded"] == "default#0"
    again = httpx.get(f"{upstream.base_url}/tool/counter?q=1", timeout=10)
    assert "x-freezeframe-recorded" in again.headers, "the second occurrence is recorded too"
    auto.stop()
    stored = freezeframe(data_dir, "show", "default", "0")["response"]["headers"]
    assert not [name for name, _ in stored if name.lower().startswith("x-freezeframe")]

    plain = start_proxy(mode="replay")
    client_env(plain)
    replayed = httpx.get(f"{upstream.base_url}/tool/counter?q=1", timeout=10)
    assert replayed.json() == first.json()
    assert not [name for name in replayed.headers if name.startswith("x-freezeframe")]
    miss = httpx.get(f"{upstream.base_url}/tool/counter?q=2", timeout=10)
    assert miss.status_code == 404 and "x-freezeframe-miss" not in miss.headers


def test_instant_pace_names_its_rewrites_and_a_miss_names_its_cassette(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    limited = httpx.post(f"{upstream.base_url}/ratelimited/full?retry_after=20", timeout=10)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "20"
    recorder.stop()

    replayer = start_proxy(
        mode="replay", args=("--replay-pace", "instant"), env={"FREEZEFRAME_ANNOTATE": "1"}
    )
    client_env(replayer)
    replayed = httpx.post(f"{upstream.base_url}/ratelimited/full?retry_after=20", timeout=10)
    assert replayed.headers["retry-after"] == "0"
    assert replayed.headers["x-freezeframe-rewrite"] == "retry-after"
    miss = httpx.get(f"{upstream.base_url}/never-recorded", timeout=10)
    assert miss.status_code == 404 and miss.headers["x-freezeframe-miss"] == "default"


def test_show_lists_each_exchanges_metadata_and_filters_by_run_model_and_status(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    chat(upstream.base_url, run="run-a", temperature=0.2, seed=7, max_tokens=50)
    with openai.OpenAI(base_url=f"{upstream.base_url}/v1", api_key="sk-test") as client:
        chunks = client.chat.completions.create(
            model="gpt-4o",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={
                "X-Freezeframe-Run-Id": "run-b",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            },
        )
        assert [c for c in chunks]
    with (
        anthropic.Anthropic(base_url=upstream.base_url, api_key="sk-ant-test") as claude,
        claude.messages.stream(
            model="claude-sonnet-5-5",
            max_tokens=64,
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_headers={"X-Freezeframe-Run-Id": "run-b"},
        ) as events,
    ):
        answer = events.get_final_message()
    httpx.post(f"{upstream.base_url}/ratelimited/full", headers={"X-Freezeframe-Run-Id": "run-b"})
    recorder.stop()

    first = freezeframe(data_dir, "show", "default", "0")["metadata"]
    assert first["provider"] == "openai" and first["api"] == "openai.chat-completions"
    assert (first["model"], first["temperature"], first["seed"], first["max_tokens"]) == (
        "gpt-4o-mini",
        0.2,
        7,
        50,
    )
    assert first["stream"] is False and first["finish_reason"] == "stop"
    assert first["system_fingerprint"].startswith("fp_") and first["request_id"].startswith("req_")
    assert first["usage"]["total_tokens"] > 0
    assert "x-ratelimit-remaining-requests" in first["rate_limits"]

    streamed = freezeframe(data_dir, "show", "default", "1")["metadata"]
    assert streamed["stream"] is True and streamed["usage"]["completion_tokens"] > 0
    assert streamed["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert streamed["parent_span_id"] == "00f067aa0ba902b7"

    claude_facts = freezeframe(data_dir, "show", "default", "2")["metadata"]
    assert claude_facts["provider"] == "anthropic"
    assert claude_facts["response_id"] == answer.id
    assert claude_facts["answered_model"] == answer.model
    assert claude_facts["finish_reason"] == answer.stop_reason
    assert claude_facts["usage"]["output_tokens"] == answer.usage.output_tokens

    def seqs(*filters: str) -> list[int]:
        return [row["seq"] for row in freezeframe(data_dir, "show", "default", *filters)]

    assert seqs("--run-id", "run-b") == [1, 2, 3]
    assert seqs("--model", "gpt-4o") == [1]
    assert seqs("--status", "429") == [3]
    assert seqs("--status", "complete", "--run-id", "run-a") == [0]
    [listed] = freezeframe(data_dir, "ls", "--model", "gpt-4o-mini")
    assert (listed["name"], listed["exchanges"]) == ("default", 1)
    assert freezeframe(data_dir, "ls", "--run-id", "nobody") == []

    bad = CliRunner().invoke(cli.main, ["ls", "--data-dir", str(data_dir), "--status", "teapot"])
    assert bad.exit_code == 2 and bad.stderr.startswith("freezeframe: error: --status 'teapot'")


def test_rekey_reports_collisions_and_replay_follows_the_new_keys(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    _, cold = chat(upstream.base_url, run="rec", temperature=0.1)
    _, warm = chat(upstream.base_url, run="rec", temperature=0.9)
    recorder.stop()
    connections = upstream.connections

    unchanged = freezeframe(data_dir, "rekey", "default")
    assert (unchanged["checked"], unchanged["changed"], unchanged["collisions"]) == (2, [], [])

    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\npath = "/v1/chat/completions"\nignore = ["$.temperature"]\n')
    planned = freezeframe(data_dir, "rekey", "default", "--rules", str(rules), "--dry-run")
    [collision] = planned["collisions"]
    assert collision["seqs"] == [0, 1] and len(collision["other_keys"]) == 2
    assert planned["written"] is False
    assert freezeframe(data_dir, "show", "default", "1")["occurrence"] == 0

    done = freezeframe(data_dir, "rekey", "default", "--rules", str(rules))
    assert done["written"] is True and len(done["changed"]) == 2
    assert freezeframe(data_dir, "verify", "default")["ok"] is True

    replayer = start_proxy(mode="replay", args=("--rules", str(rules)))
    client_env(replayer)
    _, first = chat(upstream.base_url, run="r", temperature=0.5)
    _, second = chat(upstream.base_url, run="r", temperature=0.5)
    assert [first.id, second.id] == [cold.id, warm.id], "collided recordings replay in order"
    assert upstream.connections == connections
