"""The CLI believes only a proxy run by its own user (or root) on the admin port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess, free_port

from freezeframe.proxy.trust import JAVA_TRUSTSTORE

NOBODY = 65534
SQUATTER = textwrap.dedent(
    """
    import http.server, os, sys
    document = sys.argv[2].encode()
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), None)
    os.setgid(65534)
    os.setuid(65534)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)
        def log_message(self, *args):
            pass
    server.RequestHandlerClass = Health
    server.serve_forever()
    """
)


def freezeframe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
    )


@pytest.fixture
def squat(tmp_path: Path) -> Iterator[Callable[[dict[str, object]], int]]:
    """Another local user (``nobody``) holding an admin port, answering /health with the
    document given."""
    if os.geteuid() != 0:
        pytest.fail("this test plays two users: run it as root (CI does)")
    started: list[subprocess.Popen[bytes]] = []

    def start(document: dict[str, object]) -> int:
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", SQUATTER, str(port), json.dumps(document)])
        started.append(server)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                return port
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError("the squatter did not start")

    try:
        yield start
    finally:
        for server in started:
            server.kill()
            server.wait(timeout=10)


def test_a_squatter_on_the_admin_port_is_not_believed(
    start_proxy: Callable[..., ProxyProcess],
    squat: Callable[[dict[str, object]], int],
    tmp_path: Path,
) -> None:
    """A user who binds the admin port first answered /health like the proxy: `env` printed
    his HTTPS_PROXY and CA and, run as root, wrote a trust store into his directory;
    readers read (and `import` wrote) his store. Each now refuses in one line."""
    real = start_proxy(mode="record")
    document = real.admin("GET", "/health").json()
    assert freezeframe("env", "--admin", f"127.0.0.1:{real.admin_port}").returncode == 0
    own = tmp_path / "squatter"
    own.mkdir()
    shutil.copy(real.ca_path, own / "mitmproxy-ca-cert.pem")
    shutil.copy(real.ca_path, own / "ca-bundle.pem")
    document |= {
        "proxy": "127.0.0.1:1",
        "ca": str(own / "mitmproxy-ca-cert.pem"),
        "ca_bundle": str(own / "ca-bundle.pem"),
        "data_dir": str(own),
        "store": f"sqlite:///{own}/freezeframe.db",
    }
    port = squat(document)

    for args, env in (
        (["env", "--admin", f"127.0.0.1:{port}"], None),
        (["ca", "--admin", f"127.0.0.1:{port}"], None),
        (["ls"], {"FREEZEFRAME_ADMIN": f"127.0.0.1:{port}"}),
    ):
        done = freezeframe(*args, env=env)
        assert done.returncode == 1 and done.stdout == "", (args, done.stdout)
        assert done.stderr == (
            f"freezeframe: error: what answers at http://127.0.0.1:{port} belongs to nobody "
            f"(uid {NOBODY}), not to you (root): freezeframe trusts no other user's proxy "
            "with its CA, store or environment; start your own, or pass --admin\n"
        ), args
    assert not (own / JAVA_TRUSTSTORE).exists()
    assert not (own / "freezeframe.db").exists()
