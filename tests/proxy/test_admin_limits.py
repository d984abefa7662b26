"""A client of the admin port holds a bounded share of the proxy: bytes, time, descriptors.

Each test drives a real ``freezeframe run`` process, some under a lowered descriptor limit
(``prlimit``), with raw sockets for what no well-behaved client sends.
"""

from __future__ import annotations

import contextlib
import resource
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from support.memory import peak_rss
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.admin.limits import HEAD_TIMEOUT, MAX_CONNECTIONS

pytestmark = pytest.mark.e2e

DESCRIPTORS = 1024
FLOOD = 1100


def _answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Whatever the server sends until it closes (or ``timeout`` passes)."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            piece = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not piece:
            break
        got += piece
    return got


def test_a_login_body_is_capped_before_it_is_read(
    start_proxy: Callable[..., ProxyProcess],
) -> None:
    """``POST /login`` read a whole 300 MB body before its CSRF and token checks. A body
    declared too large is answered 413 before a byte of it is read, and one that grows past
    the cap unannounced is cut off there; the proxy's memory does not follow either."""
    proxy = start_proxy(mode="record", args=("--admin-token", "t" * 40))
    with peak_rss(proxy.process.pid) as rss:
        with socket.create_connection(("127.0.0.1", proxy.admin_port), timeout=10) as sock:
            sock.sendall(
                b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: 300000000\r\n\r\n" + b"token=" + b"x" * 65536
            )
            declared = _answer(sock)
        with socket.create_connection(("127.0.0.1", proxy.admin_port), timeout=10) as sock:
            sock.sendall(
                b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * 65536
            sent = 0
            try:
                while sent < 64 * 1024 * 1024:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            streamed = _answer(sock)
    assert declared.startswith(b"HTTP/1.1 413 "), declared[:200]
    assert streamed.startswith(b"HTTP/1.1 413 "), streamed[:200]
    assert sent < 64 * 1024 * 1024, "the proxy read all of an endless body"
    assert rss[1] - rss[0] < 32 * 1024 * 1024, f"grew by {(rss[1] - rss[0]) >> 20} MiB"
    assert proxy.admin("GET", "/health").status_code == 200


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """This test process holds the flood's sockets: it needs more than the proxy gets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 256:
        pytest.fail(f"the flood needs {FLOOD + 256} descriptors; this machine allows {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, FLOOD + 256), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("many_descriptors")
def test_a_flood_of_half_sent_requests_leaves_the_proxy_proxying_and_the_log_quiet(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    upstream_ca_file: Path,
    data_dir: Path,
) -> None:
    """1,100 half-sent requests at a 1,024-descriptor limit left the proxy unable to proxy
    and logged about 239,000 tracebacks. The admin port keeps at most MAX_CONNECTIONS and
    closes heads that never end; the proxy port answers throughout; the log says each
    condition in a line or two."""
    proxy = start_proxy(
        mode="record", wrapper=("prlimit", f"--nofile={DESCRIPTORS}:{DESCRIPTORS}", "--")
    )
    process = psutil.Process(proxy.process.pid)
    before = process.num_fds()
    flood = [socket.socket() for _ in range(FLOOD)]
    try:
        for sock in flood:  # all at once: a connect the listen queue cannot take yet waits
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", proxy.admin_port))
        deadline = time.monotonic() + 10
        poll = select.poll()  # not select(): the flood's descriptors pass 1,024
        waiting = {sock.fileno(): sock for sock in flood}
        for fd in waiting:
            poll.register(fd, select.POLLOUT)
        while waiting and time.monotonic() < deadline:
            for fd, _ in poll.poll(500):
                with contextlib.suppress(OSError):
                    waiting[fd].send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
                poll.unregister(fd)
                del waiting[fd]
        held = process.num_fds() - before
        assert held <= MAX_CONNECTIONS + 8, f"the proxy holds {held} more descriptors"
        from freezeframe.proxy.trust import client_bundle

        with httpx.Client(
            proxy=f"http://127.0.0.1:{proxy.port}",
            verify=ssl.create_default_context(cafile=client_bundle(data_dir)),
            trust_env=False,
            timeout=15,
        ) as client:
            answered = [
                client.get(f"{upstream.base_url}/tool/counter").status_code for _ in range(5)
            ]
        assert answered == [200] * 5, "the proxy stopped proxying while its admin port was flooded"
    finally:
        for sock in flood:
            sock.close()
    deadline = time.monotonic() + HEAD_TIMEOUT + 10
    while time.monotonic() < deadline:
        try:
            if proxy.admin("GET", "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        raise AssertionError("the admin port did not come back once the flood ended")
    log = proxy.log
    assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    notices = [line for line in log.splitlines() if "admin port:" in line]
    assert 1 <= len(notices) <= 4, notices


def test_a_request_head_that_never_ends_is_closed_in_time(
    start_proxy: Callable[..., ProxyProcess],
) -> None:
    proxy = start_proxy(mode="record")
    with socket.create_connection(("127.0.0.1", proxy.admin_port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        began = time.monotonic()
        assert _answer(sock, HEAD_TIMEOUT + 10) == b""
        assert time.monotonic() - began < HEAD_TIMEOUT + 5
    with socket.create_connection(("127.0.0.1", proxy.admin_port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 40000)
        assert _answer(sock).startswith(b"HTTP/1.1 400 ")
