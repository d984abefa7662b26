"""The admin port of a real proxy bound to every interface, as in the docker image: it asks
for its token, answers only its own names, never serves the CA's private key or
``secret.key`` however a path is dressed up, and the CLI commands that talk to it
(``env``, ``ca``, ``replay-reset``, ``exec --proxy``) get in with ``FREEZEFRAME_ADMIN_TOKEN``."""

from __future__ import annotations

import base64
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from support.proxy import ProxyProcess

from freezeframe import cli

pytestmark = pytest.mark.e2e

TOKEN = "e2e-admin-token-7f3c9a1b5d"
BEARER = {"authorization": f"Bearer {TOKEN}"}
NAME = "freezeframe.test"
"""The name the port is allowed to answer to (--admin-host), as a compose service's is."""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    data_dir = tmp_path_factory.mktemp("admin-port") / "data"
    proxy = ProxyProcess(
        data_dir,
        args=("--admin-host", NAME),
        env={"FREEZEFRAME_ADMIN_TOKEN": TOKEN},
        admin_bind="0.0.0.0",
    )
    try:
        yield proxy.start()
    finally:
        proxy.kill()


def raw_request(port: int, target: str, host: str, method: str = "GET") -> bytes:
    """One request with its target exactly as written: httpx would normalise ``..`` away."""
    request = (
        f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Accept: */*\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


TRICKS = (
    "..",
    "../mitmproxy-ca.pem",
    "..%2fmitmproxy-ca.pem",
    "%2e%2e%2fsecret.key",
    "%2e%2e/%2e%2e/secret.key",
    "%252e%252e%252fsecret.key",
    "..\\secret.key",
    "....//secret.key",
    "mitmproxy-ca.pem",
    "secret.key",
)


def test_no_route_serves_the_ca_key_or_the_secret_key(guarded: ProxyProcess) -> None:
    key_pem = (guarded.data_dir / "mitmproxy-ca.pem").read_text()
    assert "PRIVATE KEY" in key_pem, "the walk must have a key to find"
    key_body = re.sub(r"-----[^-]+-----|\s", "", key_pem.split("-----END")[0])[:64]
    secret = (guarded.data_dir / "secret.key").read_bytes()
    forbidden = [
        b"PRIVATE KEY",
        key_body.encode(),
        secret,
        secret.hex().encode(),
        base64.b64encode(secret).rstrip(b"="),
        base64.urlsafe_b64encode(secret).rstrip(b"="),
    ]
    routes = guarded.admin("GET", "/", headers=BEARER).json()["routes"]
    data = str(guarded.data_dir.absolute()).lstrip("/")
    targets = [
        ("GET", target)
        for target in (
            "/ca.pem/../mitmproxy-ca.pem",
            "/ca.pem/..%2fmitmproxy-ca.pem",
            "/ca.pem%2f..%2fmitmproxy-ca.pem",
            "/ca.pem?file=../mitmproxy-ca.pem",
            "/mitmproxy-ca.pem",
            "/secret.key",
            f"/static/{'../' * 12}{data}/secret.key",
            f"/static/{'%2e%2e/' * 12}{data}/mitmproxy-ca.pem",
            f"/static/{'..%2f' * 12}{data}/secret.key",
            f"/static//{data}/secret.key",
            f"//{data}/secret.key",
        )
    ]
    for route in routes:
        method, path = route["method"], route["path"]
        targets.append((method, f"{path}/../mitmproxy-ca.pem"))
        for trick in TRICKS:
            filled = re.sub(r"\{[^}]+\}", lambda _, trick=trick: trick, path)
            targets.append((method, filled if "{" in path else f"{path}/{trick}"))
    answers = {
        (method, target): raw_request(guarded.admin_port, target, NAME, method)
        for method, target in targets
    }
    for (method, target), answer in answers.items():
        assert answer.startswith(b"HTTP/1.1 "), target
        found = [shown for shown in forbidden if shown in answer]
        assert not found, f"{method} {target} served key material"
    assert len(routes) > 20 and len(answers) > 200
    ca = raw_request(guarded.admin_port, "/ca.pem", NAME)
    assert b"BEGIN CERTIFICATE" in ca and b"PRIVATE KEY" not in ca


def test_a_stranger_gets_the_status_and_the_ca_and_nothing_else(guarded: ProxyProcess) -> None:
    assert guarded.admin("GET", "/health").json() == {
        "status": "ok",
        "admin_token": "required",
    }
    assert b"BEGIN CERTIFICATE" in guarded.admin("GET", "/ca.pem").content
    for path in ("/api/mode", "/api/cassettes", "/metrics", "/cassettes.json"):
        answer = guarded.admin("GET", path)
        assert answer.status_code == 401 and "Bearer" in answer.json()["error"], path
    assert guarded.admin("PUT", "/api/mode", json={"mode": "replay"}).status_code == 401
    assert guarded.admin("GET", "/api/mode", headers=BEARER).json()["mode"] == "record"
    assert "freezeframe_" in guarded.admin("GET", "/metrics", headers=BEARER).text


def test_the_port_answers_its_own_names_only(guarded: ProxyProcess) -> None:
    for host in (f"{NAME}:{guarded.admin_port}", f"localhost:{guarded.admin_port}", NAME):
        answer = guarded.admin("GET", "/api/mode", headers={**BEARER, "host": host})
        assert answer.status_code == 200, host
    rebound = guarded.admin("GET", "/api/mode", headers={**BEARER, "host": "attacker.example"})
    assert rebound.status_code == 421
    assert rebound.json()["error"] == (
        "Host 'attacker.example' is not a name of this admin port; "
        "allow it with --admin-host (FREEZEFRAME_ADMIN_HOSTS)"
    )


def freezeframe(*args: str, token: str | None) -> Result:
    return CliRunner().invoke(cli.main, list(args), env={"FREEZEFRAME_ADMIN_TOKEN": token})


def test_the_cli_talks_to_a_guarded_proxy_with_the_token(guarded: ProxyProcess) -> None:
    admin = f"127.0.0.1:{guarded.admin_port}"
    env = freezeframe("env", "--admin", admin, token=TOKEN)
    assert env.exit_code == 0, env.output
    assert f"HTTPS_PROXY={guarded.url}" in env.output.replace("'", "").replace('"', "")
    ca = freezeframe("ca", "--admin", admin, token=TOKEN)
    assert ca.exit_code == 0 and ca.output.strip() == str(guarded.ca_path.absolute())
    reset = freezeframe("replay-reset", "--admin", admin, token=TOKEN)
    assert reset.exit_code == 0 and "replay starts from the top" in reset.output
    execed = freezeframe(
        "exec",
        "--proxy",
        guarded.url,
        "--admin",
        admin,
        "--",
        sys.executable,
        "-c",
        "",
        token=TOKEN,
    )
    assert execed.exit_code == 0, execed.output

    for args in (("env",), ("ca",), ("replay-reset",)):
        refused = freezeframe(*args, "--admin", admin, token=None)
        assert refused.exit_code == 1, args
        assert "FREEZEFRAME_ADMIN_TOKEN" in refused.stderr and refused.stderr.count("\n") == 1
    wrong = freezeframe("env", "--admin", admin, "--admin-token", "x" * 20, token=None)
    assert wrong.exit_code == 1 and "the one given is wrong" in wrong.stderr


def test_a_proxy_off_loopback_without_a_token_does_not_start(tmp_path: Path) -> None:
    proxy = ProxyProcess(tmp_path / "data", admin_bind="0.0.0.0")
    with pytest.raises(RuntimeError, match="exited with 1") as refused:
        proxy.start()
    lines = [line for line in proxy.log.splitlines() if line.strip()]
    assert lines == [
        f"freezeframe: error: --admin 0.0.0.0:{proxy.admin_port} is reachable from other "
        "machines: set --admin-token (FREEZEFRAME_ADMIN_TOKEN) to a secret of at least 16 "
        "characters, or bind --admin to 127.0.0.1"
    ], refused.value
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{proxy.admin_port}/health", timeout=2)
