"""What a new user meets in their first hour, each as it tripped one up before.

Every test runs the real ``freezeframe`` as a subprocess with real clients: which CA and
proxy the client commands find, what the proxy says while it works and when it stops, how a
second run and a typo'd cassette are explained, and what an agent sees when the upstream's
certificate is not trusted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
REPO = Path(__file__).parents[2]


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``freezeframe ARGS`` run from ``cwd``, with none of this machine's FREEZEFRAME_* set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def chat(base: str, content: str = "hi") -> str:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-first-hour", max_retries=0) as oai:
        answer = oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": content}]
        )
    return str(answer.choices[0].message.content)


def test_env_ca_and_exec_find_the_running_proxys_ca_from_any_directory(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, tmp_path: Path
) -> None:
    proxy = start_proxy(mode="record")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    admin = f"127.0.0.1:{proxy.admin_port}"

    printed = cli("env", "--admin", admin, cwd=elsewhere)
    assert printed.returncode == 0, printed.stderr
    assert f"export NODE_EXTRA_CA_CERTS={proxy.ca_path.absolute()}" in printed.stdout
    assert f"export SSL_CERT_FILE={(proxy.data_dir / 'ca-bundle.pem').absolute()}" in printed.stdout
    assert cli("ca", "--admin", admin, cwd=elsewhere).stdout.strip() == str(
        proxy.ca_path.absolute()
    )

    agent = (
        "import httpx, sys; "
        "print(httpx.get(sys.argv[1] + '/tool/counter', timeout=10).json()['count'])"
    )
    ran = cli(
        "exec", "--proxy", proxy.url, "--admin", admin, "--",
        sys.executable, "-c", agent, upstream.base_url,
        cwd=elsewhere,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "1", "the agent did not get through the proxy with its CA"
    assert list(elsewhere.iterdir()) == [], "a read-only command created files here"


def test_client_commands_never_create_a_ca_and_say_what_is_missing(tmp_path: Path) -> None:
    admin = f"127.0.0.1:{free_port()}"
    for args in (["env", "--admin", admin], ["ca", "--admin", admin], ["ca", "--bundle"]):
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 1, result
        assert result.stderr.startswith("freezeframe: error: ") and result.stderr.count("\n") == 1
        assert "start one with `freezeframe run`" in result.stderr or "no CA at" in result.stderr
    wrong = cli(
        "exec", "--proxy", "http://127.0.0.1:1", "--admin", admin, "--", "true", cwd=tmp_path
    )
    assert wrong.returncode == 1 and "no freezeframe answers at" in wrong.stderr
    assert list(tmp_path.iterdir()) == []


def test_exec_proxy_refuses_a_proxy_url_the_admin_api_does_not_serve(
    start_proxy: Callable[..., ProxyProcess], tmp_path: Path
) -> None:
    proxy = start_proxy()
    other = f"http://127.0.0.1:{free_port()}"
    result = cli(
        "exec", "--proxy", other, "--admin", f"127.0.0.1:{proxy.admin_port}", "--", "true",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"proxies on {proxy.url}, not {other}" in result.stderr


def test_the_start_line_names_the_store_and_data_dir_with_the_password_masked(
    start_proxy: Callable[..., ProxyProcess], postgres_url: str, data_dir: Path
) -> None:
    with_password = postgres_url.replace("postgres@", "postgres:hunter2-secret@")
    proxy = start_proxy(store=with_password)
    line = next(line for line in proxy.log.splitlines() if "freezeframe record:" in line)
    assert with_password.replace("hunter2-secret", "***") in line
    assert f"data dir {data_dir.absolute()}" in line
    assert "hunter2" not in proxy.log
    assert "hunter2" not in json.dumps(proxy.admin("GET", "/health").json())


def test_replay_of_an_empty_cassette_says_so_and_names_the_close_ones(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, client_env: ClientEnv
) -> None:
    recorder = start_proxy(mode="record", cassette="bug-8821")
    client_env(recorder)
    chat(upstream.base_url)
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="bug-8812")
    assert re.search(
        r"cassette 'bug-8812' has no recordings; every request will miss\. Known: bug-8821",
        replayer.log,
    ), replayer.log
    client_env(replayer)
    with pytest.raises(openai.NotFoundError, match="cassette .bug-8812. does not exist"):
        chat(upstream.base_url)

    switched = replayer.admin("PUT", "/api/mode", json={"cassette": "bug-882"}).json()
    assert "has no recordings" in switched["warning"] and "bug-8821" in switched["warning"]
    assert (
        replayer.admin("PUT", "/api/mode", json={"cassette": "bug-8821"}).json().get("warning")
        is None
    )
    assert chat(upstream.base_url), "the right cassette replays"


def test_every_exchange_is_one_log_line_and_the_stop_sums_them_up(
    start_proxy: Callable[..., ProxyProcess], upstream: Upstream, client_env: ClientEnv
) -> None:
    proxy = start_proxy(mode="record", cassette="lines")
    client_env(proxy)
    chat(upstream.base_url, "one")
    with httpx.Client(timeout=10) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(f"{upstream.base_url}/v1/ratelimited")
    assert proxy.stop() == 0
    log = proxy.log
    assert re.search(
        r"recorded lines#0 POST https://localhost:\d+/v1/chat/completions 200 complete \d+ ms",
        log,
    ), log
    assert re.search(r"recorded lines#1 GET \S+/v1/ratelimited 429 truncated \d+ ms: ", log), log
    assert "stopped: recorded 2 (1 complete, 1 truncated), replayed 0, missed 0, drifted 0" in log

    replayer = start_proxy(mode="replay", cassette="lines", args=("--replay-pace", "instant"))
    client_env(replayer)
    chat(upstream.base_url, "one")
    with pytest.raises(openai.NotFoundError):
        chat(upstream.base_url, "two")
    assert replayer.stop() == 0
    assert re.search(
        r"replayed lines#0 for POST \S+/v1/chat/completions: 200 complete", replayer.log
    )
    assert "stopped: recorded 0, replayed 1, missed 1, drifted 0" in replayer.log


def test_a_second_run_against_one_replay_is_explained_and_replay_reset_fixes_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    tmp_path: Path,
) -> None:
    recorder = start_proxy(mode="record", cassette="twice")
    client_env(recorder)
    first = chat(upstream.base_url)
    recorder.stop()

    replayer = start_proxy(mode="replay", cassette="twice")
    client_env(replayer)
    assert chat(upstream.base_url) == first
    with pytest.raises(openai.NotFoundError) as missed:
        chat(upstream.base_url)
    message = str(missed.value)
    assert "all were already served" in message
    assert f"freezeframe replay-reset --admin 127.0.0.1:{replayer.admin_port}" in message
    assert "/api/replay/reset" in message

    reset = cli("replay-reset", "--admin", f"127.0.0.1:{replayer.admin_port}", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert "replay starts from the top (mode replay, cassette 'twice')" in reset.stdout
    assert chat(upstream.base_url) == first
    assert upstream.connections == 1, "only the recording reached the upstream"

    stopped = cli("replay-reset", "--admin", f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert stopped.returncode == 1 and stopped.stderr.startswith("freezeframe: error: POST ")


def test_fresh_records_a_cassette_again_from_its_first_exchange(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    first = start_proxy(mode="record", cassette="again")
    client_env(first)
    chat(upstream.base_url, "wrong setting")
    chat(upstream.base_url, "wrong setting")
    first.stop()

    again = start_proxy(mode="record", cassette="again", args=("--fresh",))
    assert "--fresh: removed 2 exchanges of cassette 'again'" in again.log
    client_env(again)
    chat(upstream.base_url, "right setting")
    again.stop()

    shown = cli("show", "again", "--json", "--data-dir", str(data_dir), cwd=data_dir.parent)
    rows = json.loads(shown.stdout)
    assert [(row["seq"], row["occurrence"]) for row in rows] == [(0, 0)]
    verified = cli("verify", "again", "--data-dir", str(data_dir), cwd=data_dir.parent)
    assert verified.returncode == 0, verified.stderr


def test_an_untrusted_upstream_certificate_is_a_json_error_naming_the_fix(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    proxy = start_proxy(mode="record", cassette="tls", upstream_ca=None)
    client_env(proxy)
    port = upstream.base_url.rsplit(":", 1)[1]
    with pytest.raises(openai.APIStatusError) as raised:
        chat(upstream.base_url)
    assert raised.value.status_code == 502
    recorded_message = str(raised.value)
    assert f"the certificate of the upstream localhost:{port} failed verification" in (
        recorded_message
    )
    assert "--upstream-ca" in recorded_message and "<html>" not in recorded_message
    assert raised.value.response.headers["content-type"] == "application/json"
    proxy.stop()
    shown = json.loads(
        cli("show", "tls", "0", "--json", "--data-dir", str(data_dir), cwd=data_dir.parent).stdout
    )
    assert shown["outcome"] == "failed"

    replayer = start_proxy(mode="replay", cassette="tls")
    client_env(replayer)
    with pytest.raises(openai.APIStatusError) as replayed:
        chat(upstream.base_url)
    assert replayed.value.response.content == raised.value.response.content
    assert upstream.connections == 1, "replay reached the upstream"


def test_the_admin_port_answers_an_index_and_one_exchange_as_show_prints_it(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: ClientEnv,
    data_dir: Path,
) -> None:
    reverse_port = free_port()
    proxy = start_proxy(
        mode="record",
        cassette="api",
        args=("--reverse", f"tools={upstream.base_url}@{reverse_port}"),
    )
    client_env(proxy)
    chat(upstream.base_url)
    index = proxy.admin("GET", "/").json()
    paths = {route["path"] for route in index["routes"]}
    assert {"/health", "/api/cassettes/{name}/{seq}", "/api/replay/reset"} <= paths
    health = proxy.admin("GET", "/health").json()
    assert health["reverse"] == [
        {"name": "tools", "url": upstream.base_url, "listen": f"127.0.0.1:{reverse_port}"}
    ]
    assert health["ca"] == str(proxy.ca_path.absolute())
    assert health["tally"]["recorded"] == 1
    proxy.stop()

    printed = cli("show", "api", "0", "--json", "--data-dir", str(data_dir), cwd=data_dir.parent)
    reader = start_proxy(mode="replay", cassette="api")
    served = reader.admin("GET", "/api/cassettes/api/0")
    assert served.status_code == 200
    assert served.json() == json.loads(printed.stdout)
    assert reader.admin("GET", "/api/cassettes/api/7").status_code == 404
    assert reader.admin("GET", "/api/cassettes/nope/0").status_code == 404
