"""Replay's misses are kept and listed, and recordings are searchable as they are written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import psutil
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def freezeframe(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )


def ask(base: str, content: str) -> str:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-misses", max_retries=0) as oai:
        answer = oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": content}]
        )
    return str(answer.choices[0].message.content)


def test_misses_are_kept_with_their_explanation_and_listed_newest_first(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="kept")
    client_env(recorder)
    ask(upstream.base_url, "Summarise the report")
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="kept", args=("--miss-details",))
    client_env(replayer)
    with httpx.Client(timeout=10, headers={"X-Freezeframe-Run-Id": "ci-77"}) as client:
        missed = client.post(
            f"{upstream.base_url}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Other"}]},
        )
    assert missed.status_code == 404
    with pytest.raises(openai.NotFoundError) as raised:
        ask(upstream.base_url, "Summarise the other report")
    said = '$.messages[0].content (recorded "Summarise the report", live "Summarise the other'
    assert said in str(raised.value)  # in the SDK's exception, as the user sees it
    assert said in replayer.log

    listed = replayer.admin("GET", "/api/cassettes/kept/misses").json()
    assert [m["occurrence"] for m in listed] == [1, 1]
    newest, oldest = listed
    assert "Summarise the other report" not in json.dumps(oldest)
    assert oldest["context"] == {"run-id": "ci-77"}
    assert oldest["message"] == missed.json()["error"]["message"]
    assert newest["nearest"][0]["seq"] == 0
    assert newest["nearest"][0]["differences"][0]["path"] == "$.messages[0].content"
    assert newest["kind"] == "freezeframe_replay_miss" and newest["recorded"] == 0
    replayer.stop()

    printed = freezeframe("show", "kept", "--misses", "--json", data_dir=data_dir)
    assert json.loads(printed.stdout) == listed
    text = freezeframe("show", "kept", "--misses", data_dir=data_dir).stdout
    said = 'differing at $.messages[0].content (recorded "Summarise the report", live "Other")'
    assert said in text
    typo = freezeframe("show", "kep", "--misses", data_dir=data_dir)
    assert typo.returncode == 0 and "no misses kept for cassette 'kep'" in typo.stdout


def writer_processes(proxy: ProxyProcess) -> list[psutil.Process]:
    """The proxy's store writer processes (storage.sql.writerchild), live ones."""
    assert proxy.process is not None
    found = []
    for child in psutil.Process(proxy.process.pid).children():
        try:
            if "writerchild" in " ".join(child.cmdline()) and child.status() != "zombie":
                found.append(child)
        except psutil.Error:
            pass  # gone since it was listed
    return found


def test_a_replay_starts_its_store_writer_with_its_first_miss(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
) -> None:
    """A replay answered from its recordings writes nothing, so its writer process is not
    started before its first answer (#30): the first miss starts it, the miss is kept, and a
    writer that then dies is reported by /health as the store's problem."""
    recorder = start_proxy(mode="record", cassette="kept")
    client_env(recorder)
    recorded = ask(upstream.base_url, "Summarise the report")
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="kept")
    client_env(replayer)
    assert ask(upstream.base_url, "Summarise the report") == recorded
    assert writer_processes(replayer) == []
    with pytest.raises(openai.NotFoundError):
        ask(upstream.base_url, "Summarise the other report")
    listed = replayer.admin("GET", "/api/cassettes/kept/misses").json()
    assert [miss["occurrence"] for miss in listed] == [1]
    (writer,) = writer_processes(replayer)

    writer.kill()
    health = replayer.health(lambda health: health["store_problem"] is not None)
    assert health["status"] == "degraded"
    assert "writer process exited" in health["store_problem"]
    assert "writer process exited" in replayer.logged("writer process exited")


def test_a_miss_answer_quotes_no_recording_to_a_shared_ports_clients(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
) -> None:
    """Any client of a shared proxy port could read a recording's prompt text from a miss,
    in every cassette (``X-Freezeframe-Cassette``). The answer names the cassette, the key
    and the differing paths; the values stay in the log, the admin API and the case file,
    and reach the answer only where the operator turns them on."""
    recorder = start_proxy(mode="record", cassette="private")
    client_env(recorder)
    ask(upstream.base_url, "Summarise the confidential merger memo")
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="other")
    client_env(replayer)
    asked = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Anything"}]}
    with httpx.Client(timeout=10, headers={"X-Freezeframe-Cassette": "private"}) as client:
        missed = client.post(f"{upstream.base_url}/v1/chat/completions", json=asked)
    assert missed.status_code == 404 and missed.headers["x-should-retry"] == "false"
    assert "confidential merger memo" not in missed.text
    error = missed.json()["error"]
    assert error["type"] == "freezeframe_replay_miss" and error["cassette"] == "private"
    assert len(error["key"]) == 64
    assert error["nearest"][0]["differences"] == [{"path": "$.messages[0].content"}]
    assert (
        "differing at $.messages[0].content (the values are in the proxy's log"
        in (error["message"])
    )
    assert "confidential merger memo" in replayer.log
    kept = replayer.admin("GET", "/api/cassettes/private/misses").json()
    assert "confidential merger memo" in kept[0]["message"]
    replayer.stop()

    detailed = start_proxy(mode="replay", cassette="private", env={"FREEZEFRAME_MISS_DETAILS": "1"})
    client_env(detailed)
    with pytest.raises(openai.NotFoundError) as raised:
        ask(upstream.base_url, "Anything")
    assert '(recorded "Summarise the confidential merger memo", live "Anything")' in str(
        raised.value
    )


def test_a_recorded_tool_answer_is_searchable_while_the_proxy_records(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    proxy = start_proxy(mode="record", cassette="searchable")
    client_env(proxy)
    with httpx.Client(timeout=10) as client:
        client.post(f"{upstream.base_url}/tool/counter", json={"order": "ord_8821"})
    ask(upstream.base_url, "Where is order ord_8821?")
    found = []
    deadline = time.monotonic() + 10
    while len(found) < 2 and time.monotonic() < deadline:  # written by the writer thread
        found = proxy.admin("GET", "/api/search", params={"q": "ord_8821"}).json()
        time.sleep(0.05)
    by_seq = {hit["seq"]: set(hit["parts"]) for hit in found}
    assert by_seq[0] == {"request", "response"}, "the tool was asked and answered with it"
    assert "request" in by_seq[1], "the next model call carried it"
    proxy.stop()
    printed = freezeframe("search", "ord_8821", "--json", data_dir=data_dir)
    assert json.loads(printed.stdout) == found
    assert freezeframe("search", "ord_8822", "--json", data_dir=data_dir).stdout.strip() == "[]"
