"""Running ``freezeframe exec`` with namespaces, and proving nothing of them is left.

Captured clients resolve names inside their namespace, and the proxy connects to the same
names from the host, as it would for a real provider. The test upstream listens on the
host's loopback, so the tests give it a name the proxy can resolve without touching the
machine's files: :func:`with_hosts` runs a command in a private mount namespace of the
test's own, whose ``/etc/hosts`` maps :data:`UPSTREAM_NAME` to 127.0.0.1.

:class:`HostState` is what a test may change by accident: links, mounts, the resolver's
files, and processes. A fixture snapshots it before a test and compares it after.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

#: the upstream's name in these tests (its certificate carries it; see support.upstream)
UPSTREAM_NAME = "api.upstream.test"
PR_SET_CHILD_SUBREAPER = 36
REPO = Path(__file__).parents[2]


def with_hosts(tmp_path: Path, command: list[str], *, resolv_conf: bool = True) -> list[str]:
    """``command`` in a mount namespace whose /etc/hosts also names the upstream.

    ``resolv_conf=False`` gives it a copy of /etc without resolv.conf: a system where
    freezeframe cannot replace the resolver, so no namespace can be made for a command.
    """
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost {UPSTREAM_NAME}\n::1 localhost\n")
    private = ["unshare", "--mount", "--propagation", "private"]
    if resolv_conf:
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [*private, "sh", "-c", script, str(hosts), *command]
    etc = tmp_path / "etc"
    script = (
        'cp -a /etc "$0" && rm -f "$0/resolv.conf" && cp "$0/../hosts" "$0/hosts" '
        '&& mount --bind "$0" /etc && exec "$@"'
    )
    return [*private, "sh", "-c", script, str(etc), *command]


def exec_argv(data_dir: Path, args: list[str], command: list[str]) -> list[str]:
    """``freezeframe exec ARGS -- COMMAND`` on fresh ports."""
    from support.proxy import free_port

    ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
    freezeframe = [
        sys.executable,
        "-P",
        "-m",
        "freezeframe",
        "exec",
        "--data-dir",
        str(data_dir),
        *ports,
    ]
    return [*freezeframe, *args, "--", *command]


def clean_env() -> dict[str, str]:
    """This environment without proxy or freezeframe settings that would change the run."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith("_PROXY") and not k.startswith("FREEZEFRAME_")
    }


def freezeframe_exec(
    tmp_path: Path, data_dir: Path, args: list[str], command: list[str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``freezeframe exec ARGS -- COMMAND`` where the upstream has its name."""
    argv = with_hosts(tmp_path, exec_argv(data_dir, args, command))
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=clean_env(), cwd=REPO
    )


def become_subreaper() -> None:
    """Orphans of the test's children become the test's, so none can go unseen."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


@dataclass(frozen=True)
class HostState:
    links: frozenset[str]
    mounts: str
    resolver: tuple[str, str]
    children: frozenset[int]

    @classmethod
    def now(cls) -> HostState:
        links = frozenset(os.listdir("/sys/class/net"))
        return cls(
            links=links,
            mounts=Path("/proc/self/mountinfo").read_text(),
            resolver=(Path("/etc/resolv.conf").read_text(), Path("/etc/hosts").read_text()),
            children=frozenset(p.pid for p in psutil.Process().children(recursive=True)),
        )

    def leftovers_after(self, before: HostState, *, grace: float) -> list[str]:
        """``leftovers``, looked at again for up to ``grace`` seconds while any remain: what
        the kernel is still taking down is not left behind; what stays is."""
        deadline = time.monotonic() + grace
        found = self.leftovers(before)
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = HostState.now().leftovers(before)
        return found

    def leftovers(self, before: HostState) -> list[str]:
        """What the test left behind, each said in words; empty when nothing."""
        found = []
        if extra := self.links - before.links:
            found.append(f"links {sorted(extra)}")
        if self.mounts != before.mounts:
            found.append("a mount in the host's mount namespace")
        if self.resolver != before.resolver:
            found.append("a change to /etc/resolv.conf or /etc/hosts")
        _reap_orphans()
        for pid in self.children - before.children:
            try:
                process = psutil.Process(pid)
                found.append(f"process {pid} {process.cmdline()} ({process.status()})")
            except psutil.NoSuchProcess:
                continue
        return found


def _reap_orphans() -> None:
    """Collect orphans that already exited (zombies of this subreaper): they left nothing."""
    for child in psutil.Process().children():
        if child.status() == psutil.STATUS_ZOMBIE:
            try:
                os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                continue
