"""``--perturb``: replayed answers fail and drift the way real services do, and the official
SDKs raise what they would raise against the real thing."""

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
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
ProxyFactory = Callable[..., ProxyProcess]

ITEMS = {"items": [{"id": 1, "name": "desk"}, {"id": 2, "name": "arm"}, {"id": 3, "name": "lamp"}]}
SPEC = ",".join(
    [
        "429=2@localhost/v1/chat/*",
        "reset@127.0.0.1/v1/chat/*",
        "503@localhost/v1/messages",
        "cut=0.5@127.0.0.1/v1/messages",
        "json-drop=$.echo.items@localhost/tool/*",
        "json-swap=$.echo.items[*].name@127.0.0.1/tool/*",
        "split@localhost/sse/*",
        "slow=400@127.0.0.1/sse/*",
    ]
)


def calls(base: str) -> dict[str, Any]:
    """One call of each kind an agent makes, to ``base``; what each gave, or raised."""
    seen: dict[str, Any] = {}
    messages = [{"role": "user", "content": "Where is my order?"}]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-perturb", max_retries=0) as oai:
        try:
            seen["openai"] = oai.chat.completions.create(model="gpt-4o", messages=messages)
        except openai.APIError as exc:
            seen["openai"] = exc
    with anthropic.Anthropic(base_url=base, api_key="sk-ant-perturb", max_retries=0) as claude:
        try:
            seen["anthropic"] = claude.messages.create(
                model="claude-sonnet-5-5", max_tokens=64, messages=messages
            )
        except anthropic.APIError as exc:
            seen["anthropic"] = exc
    seen["tool"] = httpx.post(f"{base}/tool/counter", json=ITEMS, timeout=10)
    return seen


@pytest.mark.usefixtures("nothing_left_behind")
def test_each_perturbation_raises_in_the_sdk_what_the_real_failure_would(
    upstream: Upstream, start_proxy: ProxyFactory, client_env: ClientEnv
) -> None:
    named, numbered = upstream.base_url, upstream.base_url.replace("localhost", "127.0.0.1")
    recorder = start_proxy(mode="record")
    client_env(recorder)
    calls(named), calls(numbered)
    stream = httpx.get(f"{named}/sse/slow?events=6&gap_ms=5", timeout=10)
    httpx.get(f"{numbered}/sse/slow?events=3&gap_ms=5", timeout=10)
    recorder.stop()
    upstream.reset_counters()

    replayer = start_proxy(mode="replay", args=("--annotate", "--perturb", SPEC))
    client_env(replayer)
    local, ip = calls(named), calls(numbered)
    split = httpx.get(f"{named}/sse/slow?events=6&gap_ms=5", timeout=10)
    with pytest.raises(httpx.ReadTimeout):  # 5 ms between events, stretched to 2 s
        httpx.get(f"{numbered}/sse/slow?events=3&gap_ms=5", timeout=0.5)

    limited = local["openai"]
    assert isinstance(limited, openai.RateLimitError)
    assert limited.code == "rate_limit_exceeded"
    assert limited.response.headers["retry-after"] == "2"
    assert limited.response.headers["x-freezeframe-perturbed"] == "429 retry-after 2"
    assert isinstance(ip["openai"], openai.APIConnectionError)

    failed = local["anthropic"]
    assert isinstance(failed, anthropic.InternalServerError)
    assert failed.status_code == 503
    assert failed.body["error"]["type"] == "api_error"
    assert isinstance(ip["anthropic"], anthropic.APIConnectionError)

    dropped = local["tool"]
    assert len(dropped.json()["echo"]["items"]) == 2
    assert dropped.headers["x-freezeframe-perturbed"].startswith("json-drop $.echo.items[")
    swapped = [item["name"] for item in ip["tool"].json()["echo"]["items"]]
    assert sorted(swapped) == ["arm", "desk", "lamp"] and swapped != ["desk", "arm", "lamp"]

    assert split.content == stream.content
    assert split.headers["x-freezeframe-perturbed"].startswith("split in ")
    assert upstream.connections == 0


AGENT = textwrap.dedent(
    """
    import sys, openai
    with openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-p", max_retries=0) as oai:
        try:
            oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "?"}])
        except openai.RateLimitError:
            print("rate limited")
            sys.exit(3)
    print("answered")
    """
)


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            *args[:1],
            "--data-dir",
            str(data_dir),
            *args[1:],
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=Path(__file__).parents[2],
    )


def test_runs_report_which_perturbation_led_to_which_exit_and_keep_the_variant(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path
) -> None:
    def exec_(mode: str, *args: str) -> subprocess.CompletedProcess[str]:
        return freezeframe(
            data_dir,
            "exec",
            "--mode", mode,
            "--upstream-ca", str(upstream_ca_file),
            "--listen", f"127.0.0.1:{free_port()}",
            "--admin", f"127.0.0.1:{free_port()}",
            *args,
            "--", sys.executable, "-c", AGENT, upstream.base_url,
        )  # fmt: skip

    assert exec_("record").returncode == 0
    fuzz = ("--perturb", "429@localhost/v1/*:0.5", "--replay-pace", "instant")

    runs = exec_("replay", *fuzz, "--seed", "40", "--runs", "4", "--json", "--record-into", "kept")

    assert runs.returncode == 1, runs.stderr  # some run was rate limited
    document = json.loads(runs.stdout)
    assert [run["seed"] for run in document["runs"]] == [40, 41, 42, 43]
    for run in document["runs"]:
        assert run["exit"] == (3 if run["perturbed"] else 0)
        assert run["record_into"] == f"kept-{run['seed']}"
    failing = next(run for run in document["runs"] if run["exit"] == 3)
    assert failing["perturbed"][0]["perturbation"] == "429 retry-after 1"
    assert failing["perturbed"][0]["request"].startswith("POST https://localhost:")
    assert "rate limited" in runs.stderr and "answered" in runs.stderr

    again = exec_("replay", *fuzz, "--seed", str(failing["seed"]), "--json")
    assert json.loads(again.stdout)["runs"][0]["perturbed"] == failing["perturbed"]

    kept = freezeframe(data_dir, "show", f"kept-{failing['seed']}", "0", "--json")
    assert kept.returncode == 0, kept.stderr
    exchange = json.loads(kept.stdout)
    assert exchange["response"]["status"] == 429
    assert exchange["origin"]["changes"] == ["perturbed: 429 retry-after 1"]
    assert upstream.connections == 1  # the recording only

    # The table on a terminal; from the failing seed, so that a perturbation is in it.
    table = exec_("replay", *fuzz, "--seed", str(failing["seed"]), "--runs", "2")
    assert "by perturbation" in table.stdout and "429" in table.stdout
