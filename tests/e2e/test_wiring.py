"""Other ways in: reverse mode, `exec`, `env`, and chaining to a corporate proxy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from support.proxy import ProxyProcess, free_port
from support.upstream import ConnectTunnel, Upstream

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def sdk_calls(openai_base: str, anthropic_base: str) -> list[object]:
    with openai.OpenAI(base_url=openai_base, api_key="sk-reverse", max_retries=0) as oai:
        with anthropic.Anthropic(
            base_url=anthropic_base, api_key="sk-ant-reverse", max_retries=0
        ) as claude:
            messages = [{"role": "user", "content": "hello there"}]
            return [
                oai.chat.completions.create(model="gpt-4o-mini", messages=messages).model_dump(),  # type: ignore[arg-type]
                [
                    c.model_dump()
                    for c in oai.chat.completions.create(
                        model="gpt-4o-mini",
                        messages=messages,
                        stream=True,  # type: ignore[arg-type]
                    )
                ],
                claude.messages.create(
                    model="claude-sonnet-5-5",
                    max_tokens=32,
                    messages=messages,  # type: ignore[arg-type]
                ).model_dump(),
            ]


def test_reverse_mode_records_and_replays_for_sdks_given_a_base_url(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    port = free_port()
    reverse = ("--reverse", f"provider={upstream.base_url}@{port}")
    base = f"http://127.0.0.1:{port}"

    recorder = start_proxy(mode="record", args=reverse)
    recorded = sdk_calls(f"{base}/v1", base)
    recorder.stop()
    upstream.reset_counters()

    start_proxy(mode="replay", args=reverse)
    assert sdk_calls(f"{base}/v1", base) == recorded
    assert upstream.connections == 0


def test_reverse_and_proxy_mode_share_one_cassette_scheme(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    recorder = start_proxy(mode="record")
    client_env(recorder)
    recorded = httpx.get(f"{upstream.base_url}/tool/counter").json()
    recorder.stop()

    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name)
    start_proxy(mode="replay", args=("--reverse", f"tools={upstream.base_url}@{port}"))
    assert httpx.get(f"http://127.0.0.1:{port}/tool/counter").json() == recorded


AGENT = textwrap.dedent(
    """
    import os, sys, httpx
    answer = httpx.get(sys.argv[1] + "/tool/counter", timeout=10).json()
    print(answer["count"], os.environ["NO_PROXY"] == "", flush=True)
    sys.exit(int(sys.argv[2]))
    """
)


def exec_agent(
    data_dir: Path, ca: Path, mode: str, url: str, status: int
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "exec",
            "--mode",
            mode,
            "--data-dir",
            str(data_dir),
            "--upstream-ca",
            str(ca),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--admin",
            f"127.0.0.1:{free_port()}",
            "--",
            sys.executable,
            "-c",
            AGENT,
            url,
            str(status),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=Path(__file__).parents[2],
    )


@pytest.mark.usefixtures("nothing_left_behind")
def test_exec_runs_the_agent_through_the_proxy_and_passes_its_status_through(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path
) -> None:
    recorded = exec_agent(data_dir, upstream_ca_file, "record", upstream.base_url, 0)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.split() == ["1", "True"]
    upstream.reset_counters()

    replayed = exec_agent(data_dir, upstream_ca_file, "replay", upstream.base_url, 3)
    assert replayed.returncode == 3, replayed.stderr
    assert replayed.stdout.split() == ["1", "True"], "the replay did not serve the recording"
    assert upstream.connections == 0

    missing = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "exec",
            "--data-dir",
            str(data_dir),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--admin",
            f"127.0.0.1:{free_port()}",
            "--",
            "/nonexistent/agent",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        .splitlines()[-1]
        .startswith("freezeframe: error: cannot run '/nonexistent/agent'")
    )


def test_env_prints_what_a_client_needs_in_each_shell(
    start_proxy: Callable[..., ProxyProcess], data_dir: Path
) -> None:
    proxy = start_proxy(mode="record")

    def env(shell: str) -> str:
        return subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "freezeframe",
                "env",
                "--shell",
                shell,
                "--admin",
                f"127.0.0.1:{proxy.admin_port}",
                "--data-dir",
                str(data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    sh = env("sh")
    assert f"export HTTPS_PROXY=http://127.0.0.1:{proxy.port}" in sh
    assert f"export NODE_EXTRA_CA_CERTS={proxy.ca_path.absolute()}" in sh
    assert f"export SSL_CERT_FILE={(data_dir / 'ca-bundle.pem').absolute()}" in sh
    assert "export NODE_USE_ENV_PROXY=1" in sh
    truststore = (data_dir / "ca-truststore.p12").absolute()
    assert f"-Dhttps.proxyPort={proxy.port} " in sh and f"trustStore={truststore} " in sh
    shown = subprocess.run(
        ["sh", "-c", sh + 'printf "%s|%s" "$HTTPS_PROXY" "${SSL_CERT_DIR-unset}"'],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout
    assert shown == f"http://127.0.0.1:{proxy.port}|unset"
    assert f"set -gx HTTPS_PROXY 'http://127.0.0.1:{proxy.port}'" in env("fish")
    assert f"HTTPS_PROXY='http://127.0.0.1:{proxy.port}'" in env("dotenv")

    proxy.stop()
    gone = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "env",
            "--admin",
            f"127.0.0.1:{proxy.admin_port}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert gone.returncode == 1 and "no freezeframe answers at" in gone.stderr


def test_env_output_quotes_a_hostile_data_dir_for_each_shell(
    start_proxy: Callable[..., ProxyProcess], data_dir: Path, tmp_path: Path
) -> None:
    """A data dir's path holding ``\\'`` ran commands when fish read ``env --shell fish``
    (``shlex.quote``'s escape is sh's, not fish's): each shell reads its own quoting back
    as the one path, and runs nothing."""
    proxy = start_proxy(mode="record")
    planted = tmp_path / "planted"  # what the shells would make, run in tmp_path
    hostile = tmp_path / "dir \\'; touch planted; echo ' $(touch planted) `touch planted`"
    hostile.mkdir()
    (hostile / "mitmproxy-ca-cert.pem").write_bytes(proxy.ca_path.read_bytes())

    def env(shell: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "freezeframe",
                "env",
                "--shell",
                shell,
                "--admin",
                f"127.0.0.1:{proxy.admin_port}",
                "--data-dir",
                str(hostile),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )

    wanted = str((hostile / "ca-bundle.pem").absolute())
    for shell, show in (
        ("sh", 'printf "%s" "$SSL_CERT_FILE"'),
        ("fish", "printf %s $SSL_CERT_FILE"),
    ):
        lines = env(shell)
        assert lines.returncode == 0, lines.stderr
        shown = subprocess.run(
            [shell, "-c", lines.stdout + show],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=tmp_path,
        )
        assert (shell, shown.stdout) == (shell, wanted), shown.stderr
        assert not planted.exists(), f"{shell} ran a command from the data dir's path"
    dotenv = env("dotenv")
    assert dotenv.returncode == 1 and dotenv.stdout == ""
    assert dotenv.stderr.startswith("freezeframe: error: SSL_CERT_FILE (")
    assert "cannot be written as a dotenv value" in dotenv.stderr
    assert len(dotenv.stderr.splitlines()) == 1


def test_an_upstream_proxy_carries_recording_but_never_replay(
    upstream: Upstream, start_proxy: Callable[..., ProxyProcess], client_env: ClientEnv
) -> None:
    with ConnectTunnel() as corporate:
        url = f"{upstream.base_url}/v1/ratelimited"
        chained = ("--upstream-proxy", corporate.url)
        recorder = start_proxy(mode="record", args=chained)
        client_env(recorder)
        counter = httpx.get(f"{upstream.base_url}/tool/counter").json()
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(url).read()
        recorder.stop()
        assert corporate.connects == [f"localhost:{upstream.port}"] * 2
        upstream.reset_counters()

        replayer = start_proxy(mode="replay", args=chained)
        client_env(replayer)
        assert httpx.get(f"{upstream.base_url}/tool/counter").json() == counter
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(url).read()
        assert corporate.connects == [f"localhost:{upstream.port}"] * 2, "replay used the proxy"
        assert upstream.connections == 0


def test_a_bad_upstream_proxy_or_reverse_target_is_one_line(tmp_path: Path) -> None:
    for args, fragment in (
        (["--upstream-proxy", "ftp://user:hunter2@proxy:21"], "upstream proxy"),
        (["--reverse", "openai=https://api.openai.com"], "expected NAME=URL@PORT"),
        (["--reverse", "openai=https://api.openai.com/v1@8082"], "no path"),
    ):
        result = subprocess.run(
            [sys.executable, "-P", "-m", "freezeframe", "run", "--data-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        message = result.stderr.strip()
        assert result.returncode == 1 and "\n" not in message, message
        assert fragment in message and "hunter2" not in message
