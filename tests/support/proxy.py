"""Runs the real ``freezeframe run`` as a subprocess, the way a user runs it.

Nothing is mocked: the process binds real ports, terminates TLS with its own CA, and
writes to a real store. Every wait is bounded, and ``stop()`` always leaves no process
behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from freezeframe.proxy.ports import unused_port

START_TIMEOUT = 30.0
PORT_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """The proxy's own port was taken by another process before it could bind it."""


STOP_TIMEOUT = 20.0


def free_port() -> int:
    return unused_port()


class ProxyProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        mode: str = "record",
        cassette: str = "default",
        upstream_ca: Path | None = None,
        store: str | None = None,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        admin_bind: str = "127.0.0.1",
        wrapper: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.admin_bind = admin_bind
        """Where the admin port binds; the tests reach it on 127.0.0.1 either way."""
        self.port = free_port()
        self.admin_port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}-proxy-{self.port}.log"
        command = [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "run",
            "--data-dir",
            str(data_dir),
            "--mode",
            mode,
            "--cassette",
            cassette,
        ]
        if upstream_ca is not None:
            command += ["--upstream-ca", str(upstream_ca)]
        if store is not None:
            command += ["--store", store]
        self._args = [*wrapper, *command, *args]
        """``wrapper`` runs the proxy through another program (a namespace of its own, say),
        which must end by exec'ing it, so that the process is the proxy."""
        self.env = {**os.environ, **(env or {})}
        for name in list(self.env):
            if name.upper().startswith("FREEZEFRAME_") and not (env and name in env):
                del self.env[name]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def ca_path(self) -> Path:
        return self.data_dir / "mitmproxy-ca-cert.pem"

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def command(self) -> list[str]:
        ports = [
            "--listen",
            f"127.0.0.1:{self.port}",
            "--admin",
            f"{self.admin_bind}:{self.admin_port}",
        ]
        return [*self._args, *ports]

    def start(self) -> ProxyProcess:
        """Start and wait until healthy. A port that another process took between
        free_port() and the start is picked again, a few times: tests run beside others."""
        for _ in range(PORT_ATTEMPTS - 1):
            try:
                return self._start()
            except PortTaken:
                self.port, self.admin_port = free_port(), free_port()
        return self._start()

    def _start(self) -> ProxyProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.command, stdout=log, stderr=log, env=self.env, cwd=Path(__file__).parents[2]
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                ours = (
                    f"127.0.0.1:{self.port} (--listen)",
                    f"{self.admin_bind}:{self.admin_port} (--admin)",
                )
                if "address in use" in self.log and any(port in self.log for port in ours):
                    raise PortTaken(self.log)
                raise RuntimeError(
                    f"freezeframe exited with {self.process.returncode}:\n{self.log}"
                )
            try:
                if self.admin("GET", "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"freezeframe did not become healthy in {START_TIMEOUT}s:\n{self.log}")

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Talk to the admin API directly, whatever proxy variables the test has set."""
        kwargs.setdefault("timeout", 10.0)
        with httpx.Client(trust_env=False) as client:
            return client.request(method, f"{self.admin_url}{path}", **kwargs)

    def stored(self, cassette: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The cassette's listing once it holds ``count`` exchanges: the writer commits in
        batches after the answers end, so a client can be ahead of the store for a moment."""
        deadline = time.monotonic() + timeout
        while True:
            rows: list[dict[str, Any]] = self.admin("GET", f"/api/cassettes/{cassette}").json()
            if len(rows) >= count or time.monotonic() > deadline:
                return rows
            time.sleep(0.05)

    def health(
        self, until: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """``/health`` once ``until`` holds for it (or the last one read, after ``timeout``):
        the store writer reports a problem when it gives an exchange up, and clears it when
        it next commits one, both on its own thread after the answer has gone."""
        deadline = time.monotonic() + timeout
        while True:
            health: dict[str, Any] = self.admin("GET", "/health").json()
            if until(health) or time.monotonic() > deadline:
                return health
            time.sleep(0.05)

    def logged(self, text: str, count: int = 1, timeout: float = 30.0) -> str:
        """The log once ``text`` is in it ``count`` times (or as it is, after ``timeout``):
        what the proxy logs after an answer has gone, such as the store writer's errors."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log
            if log.count(text) >= count or time.monotonic() > deadline:
                return log
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the way an operator would; return the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"freezeframe ignored {sig!r} for {STOP_TIMEOUT}s:\n{self.log}"
            raise RuntimeError(message) from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT)

    def client_env(self, bundle: Path) -> dict[str, str]:
        """What an agent's environment holds when pointed at this proxy."""
        return {
            "HTTPS_PROXY": self.url,
            "HTTP_PROXY": self.url,
            "https_proxy": self.url,
            "http_proxy": self.url,
            "NO_PROXY": "",
            "no_proxy": "",
            "SSL_CERT_FILE": str(bundle),
            "REQUESTS_CA_BUNDLE": str(bundle),
            "CURL_CA_BUNDLE": str(bundle),
        }
