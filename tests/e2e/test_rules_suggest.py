"""``freezeframe rules suggest``: a volatile field planted in an agent's requests is found
from the recordings alone, with its evidence; the prompt is never suggested; a miss caused by
the field names the rule; ``--apply`` shows what rekey would change, then writes the rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
STAMPS = (
    "2026-11-28T09:04:11.112Z",
    "2026-11-28T09:04:37.820Z",
    "2026-11-28T09:05:02.004Z",
    "2026-11-28T09:05:40.315Z",
)


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


def agent(base: str, question: str, stamp: str, order: int) -> None:
    """One turn: a model call stamped with the client's clock, and a tool call stamped the
    same way; the order id is a real argument, and differs from turn to turn."""
    with openai.OpenAI(base_url=base + "/v1", api_key="sk-suggest", max_retries=0) as client:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "You are the order desk."},
                {"role": "user", "content": question},
            ],
            extra_body={"client_ts": stamp},
        )
    answer = httpx.post(
        base + "/tool/counter", json={"q": "orders", "client_ts": stamp, "order": order}
    )
    assert answer.status_code == 200


def test_a_planted_volatile_field_is_found_and_the_prompt_left_alone(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    upstream: Upstream,
    data_dir: Path,
) -> None:
    proxy = start_proxy(mode="record", cassette="desk")
    client_env(proxy)
    agent(upstream.base_url, "Where is order 41?", STAMPS[0], 41)
    agent(upstream.base_url, "Where is order 41?", STAMPS[1], 41)
    agent(upstream.base_url, "Where is order 42? It is late.", STAMPS[2], 42)
    assert proxy.stop() == 0

    done = freezeframe(data_dir, "rules", "suggest", "desk", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["suggestions"]
    assert {(s["path"], s["where"]) for s in found} == {
        ("/v1/chat/completions", "$.client_ts"),
        ("/tool/counter", "$.client_ts"),
    }
    for suggestion in found:
        assert suggestion["why"] == "generated values"
        assert suggestion["rule"]["ignore"] == ["$.client_ts"]
        first = suggestion["evidence"][0]
        assert first["values"] == [json.dumps(STAMPS[0]), json.dumps(STAMPS[1])]
    tool = next(s for s in found if s["path"] == "/tool/counter")
    assert tool["evidence"][0]["exchanges"] == [1, 3]
    assert tool["pairs"] == 3  # each pair of the three tool calls differs in its stamp
    assert not any("messages" in s["where"] or "order" in s["where"] for s in found)

    # A replay on another morning misses on the stamp alone, and the miss names the rule.
    replay = start_proxy(mode="replay", cassette="desk")
    client_env(replay)
    missed = httpx.post(
        upstream.base_url + "/tool/counter",
        json={"q": "orders", "client_ts": STAMPS[3], "order": 41},
    )
    assert missed.status_code >= 400
    message = missed.json()["error"]["message"]
    assert (
        '$.client_ts looks generated on both sides: the rule [[rule]] host = "localhost", '
        'path = "/tool/counter", ignore = ["$.client_ts"] would have made this a hit'
    ) in message
    assert replay.stop() == 0

    applied = freezeframe(data_dir, "rules", "suggest", "desk", "--apply")
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.splitlines()
    assert "rekey would change 6 keys of desk: 2 merged, 1 recorded misses turned into hits" in (
        lines
    )
    assert "  merged: #0, #2" in lines
    assert "  merged: #1, #3" in lines
    assert f"  would hit: POST {upstream.base_url}/tool/counter" in lines
    rules = (data_dir / "rules.toml").read_text()
    assert rules.count("[[rule]]") == 2
    assert 'ignore = ["$.client_ts"]' in rules
    assert "messages" not in rules

    assert freezeframe(data_dir, "rekey", "desk").returncode == 0
    replay = start_proxy(mode="replay", cassette="desk")
    client_env(replay)
    hit = httpx.post(
        upstream.base_url + "/tool/counter",
        json={"q": "orders", "client_ts": STAMPS[3], "order": 41},
    )
    assert hit.status_code == 200
    assert hit.json()["echo"]["client_ts"] == STAMPS[0]
    assert replay.stop() == 0
