"""Clients that ignore proxy settings: recorded with --capture transparent, stopped in replay.

Every run is a real ``freezeframe exec`` with real namespaces (made and removed by exec),
real clients (the official ``openai`` Node.js SDK, Node's fetch and https.get, axios,
aiohttp with its defaults, a JVM, curl) and the real TLS upstream. Each test proves
afterwards that no link, mount, resolver change or process is left on the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from support.netns import (
    REPO,
    UPSTREAM_NAME,
    clean_env,
    exec_argv,
    freezeframe_exec,
    with_hosts,
)
from support.upstream import Upstream

from freezeframe.storage import open_store

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("nothing_left_behind"),
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces for the test upstream need root"),
]

NODE_PROJECT = REPO / "tests" / "node"

AIOHTTP_AGENT = textwrap.dedent(
    """
    import asyncio, json, sys
    import aiohttp

    async def main(base):
        async with aiohttp.ClientSession() as session:  # trust_env=False: no proxy variables
            chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            async with session.post(base + "/v1/chat/completions", json=chat) as answer:
                completion = await answer.json()
            async with session.get(base + "/tool/counter") as answer:
                counter = await answer.json()
        print(json.dumps({"aiohttp": [completion["choices"][0]["message"], counter]}))

    asyncio.run(main(sys.argv[1]))
    """
)

HTTPX_AGENT = textwrap.dedent(
    """
    import json, os, ssl, sys
    import httpx

    base, ignoring_cassette, honouring_cassette = sys.argv[1:4]
    trust = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    clients = {  # one ignores the proxy variables (but trusts the CA exec names), one uses them
        "ignores": httpx.Client(trust_env=False, verify=trust, timeout=10),
        "honours": httpx.Client(timeout=10),
    }
    cassettes = {"ignores": ignoring_cassette, "honours": honouring_cassette}
    answers = {}
    for how, client in clients.items():
        client.headers["X-Freezeframe-Cassette"] = cassettes[how]
        with client:
            chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            completion = client.post(base + "/v1/chat/completions", json=chat).json()
            counter = client.get(base + "/tool/counter", params={"q": "1"}).json()
        answers[how] = [completion["choices"][0]["message"], completion["id"], counter]
    print(json.dumps(answers))
    """
)

DIRECT_AGENT = textwrap.dedent(
    """
    import json, os, ssl, sys
    import httpx

    url, also_proxied = sys.argv[1], sys.argv[2] == "also-proxied"
    trust = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    trust.load_verify_locations(sys.argv[3])  # the upstream's own CA, trusted when reached directly
    result = {}
    try:
        with httpx.Client(trust_env=False, verify=trust, timeout=10) as direct:
            result["direct"] = direct.get(url).status_code
    except httpx.ConnectError as exc:
        result["direct"] = f"ConnectError: {exc}"
    if also_proxied:
        with httpx.Client(timeout=10) as proxied:
            result["proxied"] = proxied.get(url).status_code
    print(json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def node_project() -> Path:
    if shutil.which("node") is None:
        pytest.fail("Node.js is not installed; the README says how to get it")
    if not (NODE_PROJECT / "node_modules" / "openai").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_PROJECT, check=True)
    return NODE_PROJECT


def base_url(upstream: Upstream) -> str:
    return f"https://{UPSTREAM_NAME}:{upstream.port}"


def run(
    tmp_path: Path, data_dir: Path, ca: Path, args: list[str], command: list[str]
) -> subprocess.CompletedProcess[str]:
    result = freezeframe_exec(tmp_path, data_dir, ["--upstream-ca", str(ca), *args], command)
    assert result.returncode == 0, result.stderr
    return result


def test_node_and_aiohttp_agents_are_recorded_transparently_and_replayed_offline(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path, node_project: Path
) -> None:
    aiohttp_agent = tmp_path / "aiohttp_agent.py"
    aiohttp_agent.write_text(AIOHTTP_AGENT)
    both = 'node "$1" "$0" && "$2" "$3" "$0"'
    agents = ["sh", "-c", both, base_url(upstream), str(node_project / "agent.mjs")]
    agents += [sys.executable, str(aiohttp_agent)]
    capture = ["--capture", "transparent", "--cassette", "agents"]

    recorded = run(tmp_path, data_dir, upstream_ca_file, [*capture, "--mode", "record"], agents)
    node, aio = (json.loads(line) for line in recorded.stdout.splitlines())
    assert node["fetched"]["count"] == 1 and node["got"]["echo"] == {"via": "https.get"}
    assert node["streamed"] and aio["aiohttp"][1]["count"] == 3
    assert len(upstream.requests) == 6, "every call reached the upstream through the proxy"
    upstream.reset_counters()

    replayed = run(tmp_path, data_dir, upstream_ca_file, [*capture, "--mode", "replay"], agents)
    assert replayed.stdout == recorded.stdout
    assert upstream.connections == 0 and upstream.requests == []

    upstream.stop()
    offline = run(tmp_path, data_dir, upstream_ca_file, [*capture, "--mode", "replay"], agents)
    assert offline.stdout == recorded.stdout


def test_a_transparent_recording_replays_through_https_proxy_and_the_other_way_round(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path
) -> None:
    """One client is captured, one uses HTTPS_PROXY; the replay swaps their cassettes."""
    capture = ["--capture", "transparent"]
    agent = [sys.executable, "-c", HTTPX_AGENT, base_url(upstream)]

    recorded = run(tmp_path, data_dir, upstream_ca_file, capture, [*agent, "captured", "proxied"])
    upstream.reset_counters()
    replay = [*capture, "--mode", "replay"]
    replayed = run(tmp_path, data_dir, upstream_ca_file, replay, [*agent, "proxied", "captured"])
    before, after = json.loads(recorded.stdout), json.loads(replayed.stdout)
    assert before["ignores"] != before["honours"], "the upstream answers each call differently"
    assert after == {"ignores": before["honours"], "honours": before["ignores"]}, replayed.stderr
    assert upstream.connections == 0

    shown = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "show",
            "captured",
            "--json",
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=REPO,
    ).stdout
    assert f"https://{UPSTREAM_NAME}:{upstream.port}/v1/chat/completions" in shown
    assert "198.18." not in shown, "a captured flow was stored under its namespace address"


def test_node_fetch_retrying_a_421_gets_what_it_gets_directly_and_both_are_recorded(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path, node_project: Path
) -> None:
    """Node's fetch retries a 421 on a new connection with the same body. Captured, it gets
    the retry's own 421 (not ``RequestContentLengthMismatchError``), and the retry is
    recorded with its body (tests/e2e/test_node_fetch_retry.py says why it was not)."""
    script = str(node_project / "misdirected.mjs")
    url = f"{base_url(upstream)}/misdirected"
    capture = ["--capture", "transparent", "--cassette", "retried"]
    recorded = run(tmp_path, data_dir, upstream_ca_file, capture, ["node", script, url])
    answer = json.loads(recorded.stdout)
    assert answer.get("status") == 421 and answer["body"]["n"] == 2, answer
    sent = {"task": "book a table", "for": 2}
    assert [r.json() for r in upstream.requests] == [sent, sent]
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}", create=False) as store:
        store.flush(10)
        bodies = [
            json.loads(store.exchange("retried", seq).recorded.request_body) for seq in (0, 1)
        ]
    assert bodies == [sent, sent]


def test_replay_isolation_refuses_a_client_that_ignores_proxies_and_says_so(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path
) -> None:
    url = f"{base_url(upstream)}/tool/counter"

    def direct(args: list[str], also_proxied: bool) -> tuple[dict[str, object], str]:
        how = "also-proxied" if also_proxied else "direct-only"
        agent = [sys.executable, "-c", DIRECT_AGENT, url, how, str(upstream_ca_file)]
        result = run(tmp_path, data_dir, upstream_ca_file, args, agent)
        return json.loads(result.stdout), result.stderr

    blocked = f"blocked a direct connection from the command to {UPSTREAM_NAME}:{upstream.port}"

    replayed, log = direct(["--mode", "replay"], also_proxied=True)
    assert str(replayed["direct"]).startswith("ConnectError"), replayed
    assert replayed["proxied"] == 404, "the replaying proxy stays reachable (and misses)"
    assert upstream.connections == 0
    assert blocked in log and "not isolated" not in log

    recorded, log = direct(["--mode", "record", "--isolate"], also_proxied=True)
    assert str(recorded["direct"]).startswith("ConnectError") and recorded["proxied"] == 200
    assert len(upstream.requests) == 1, "only the proxied request reached the upstream"
    assert blocked in log
    upstream.reset_counters()

    # Without the namespace the same client reaches the upstream: the namespace is what stops it.
    around, log = direct(["--mode", "record", "--no-isolate"], also_proxied=False)
    assert around["direct"] == 200 and len(upstream.requests) == 1
    assert "the command sent no request through freezeframe, so nothing was recorded" in log


def test_a_jvm_axios_and_curl_go_through_the_proxy_on_the_variables_exec_sets(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path, node_project: Path
) -> None:
    """Recorded isolated: a client that did not use the proxy would be refused, not recorded."""
    if shutil.which("java") is None:
        pytest.skip("no JVM on this machine")
    agents = 'java "$1" "$0" && node "$2" "$0" && curl -sS "$0/tool/counter?via=curl"'
    command = ["sh", "-c", agents, base_url(upstream), str(REPO / "tests" / "jvm" / "Agent.java")]
    command.append(str(node_project / "axios.mjs"))
    recorded = run(tmp_path, data_dir, upstream_ca_file, ["--isolate"], command)
    answers = [json.loads(line) for line in recorded.stdout.splitlines()]
    assert [a["echo"]["via"] for a in answers] == ["httpclient", "urlconnection", "axios", "curl"]
    assert len(upstream.requests) == 4
    assert "blocked" not in recorded.stderr


def test_exec_stopped_by_sigterm_or_unable_to_start_its_command_leaves_nothing_behind(
    upstream_ca_file: Path, data_dir: Path, tmp_path: Path
) -> None:
    """The namespace, the capture interface and the command go when exec is stopped; the
    fixture checks the host. A command that cannot run is one line, as without a namespace."""
    args = ["--capture", "transparent", "--upstream-ca", str(upstream_ca_file)]
    argv = with_hosts(tmp_path, exec_argv(data_dir, args, ["sleep", "60"]))
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not any(
            p.name() == "sleep" for p in psutil.Process(process.pid).children(recursive=True)
        ):
            assert process.poll() is None and time.monotonic() < deadline, "sleep never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 128 + signal.SIGTERM, log
    assert "stopping" in log

    missing = freezeframe_exec(
        tmp_path, data_dir, ["--capture", "transparent", "--mode", "replay"], ["/nonexistent/agent"]
    )
    assert missing.returncode == 1
    last = missing.stderr.strip().splitlines()[-1]
    assert last.startswith("freezeframe: error: cannot run '/nonexistent/agent'"), last


def test_replay_where_no_namespace_can_be_made_says_so_in_one_line_and_runs_as_before(
    upstream: Upstream, upstream_ca_file: Path, data_dir: Path, tmp_path: Path
) -> None:
    """A system without /etc/resolv.conf, where the namespace's resolver cannot go."""
    url = f"{base_url(upstream)}/tool/counter"
    agent = [sys.executable, "-c", DIRECT_AGENT, url, "direct-only", str(upstream_ca_file)]

    def replay(*args: str) -> subprocess.CompletedProcess[str]:
        argv = exec_argv(data_dir, ["--mode", "replay", *args], agent)
        return subprocess.run(
            with_hosts(tmp_path, argv, resolv_conf=False),
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
            cwd=REPO,
        )

    ran = replay()
    assert ran.returncode == 0, ran.stderr
    notices = [line for line in ran.stderr.splitlines() if "not isolated" in line]
    assert len(notices) == 1 and "/etc/resolv.conf does not exist" in notices[0], ran.stderr
    assert json.loads(ran.stdout) == {"direct": 200}, "it ran as exec ran before isolation"
    assert len(upstream.requests) == 1

    insisted = replay("--isolate")
    message = insisted.stderr.strip().splitlines()[-1]
    assert insisted.returncode == 1 and insisted.stdout == ""
    assert message.startswith("freezeframe: error: --isolate: cannot make a network namespace")
    assert len(upstream.requests) == 1


SOCKET_AGENT = textwrap.dedent(
    """
    import json, os, socket, sys
    import psycopg

    try:
        with psycopg.connect(
            "host=/var/run/postgresql user=postgres dbname=postgres connect_timeout=5"
        ) as db:
            reached = db.execute("SELECT 1").fetchone()[0] == 1
    except psycopg.OperationalError as exc:
        reached = str(exc).splitlines()[0]
    leaked = sorted(name for name in os.environ if name.startswith("FREEZEFRAME_"))
    print(json.dumps({"postgres": reached, "freezeframe": leaked}))
    """
)


def test_an_isolated_command_reaches_no_host_socket_and_no_freezeframe_secret(
    upstream_ca_file: Path, data_dir: Path, tmp_path: Path
) -> None:
    """``exec --isolate`` left the host's Unix sockets in reach (psycopg wrote to PostgreSQL
    through /var/run/postgresql, so a replayed run could repeat its side effects) and passed
    FREEZEFRAME_ADMIN_TOKEN on. Only the proxy is in reach now; without isolation the same
    command still reaches the database, so the namespace is what stops it."""
    if not Path("/var/run/postgresql/.s.PGSQL.5432").exists():
        pytest.fail("this test needs the local PostgreSQL's Unix socket (CI runs one)")
    secrets = {
        "FREEZEFRAME_ADMIN_TOKEN": "t" * 40,
        "FREEZEFRAME_STORE": f"sqlite:///{data_dir}/freezeframe.db",
    }

    def agent(isolation: str) -> dict[str, object]:
        argv = with_hosts(
            tmp_path,
            exec_argv(
                data_dir,
                ["--upstream-ca", str(upstream_ca_file), "--mode", "record", isolation],
                [sys.executable, "-c", SOCKET_AGENT],
            ),
        )
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            env={**clean_env(), **secrets},
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    isolated = agent("--isolate")
    assert isolated["postgres"] is not True and "Connection refused" in str(isolated["postgres"])
    assert isolated["freezeframe"] == []
    around = agent("--no-isolate")
    assert around["postgres"] is True
    assert around["freezeframe"] == ["FREEZEFRAME_ADMIN_TOKEN", "FREEZEFRAME_STORE"]
