"""Whether mitmproxy's ``local`` capture mode can run on this machine, said in one line.

``exec --capture local`` hands the command's pid to mitmproxy's local redirector, which on
Linux is an eBPF program (``mitmproxy-linux-redirector``) attached to the root of the
cgroup v2 hierarchy, loaded through ``sudo``. Where any of that is missing the redirector
fails after the proxy has started, in a log nobody reads, and the command runs uncaptured.
So the conditions are checked first, and ``exec`` refuses with the reason instead.
"""

from __future__ import annotations

import os
import shutil
import sys

CGROUP_ROOT = "/sys/fs/cgroup"
KERNEL_BTF = "/sys/kernel/btf/vmlinux"


def _cgroup_root_type() -> str | None:
    """The file system mounted at the cgroup root (the last mount there wins)."""
    kind = None
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and fields[1] == CGROUP_ROOT:
                    kind = fields[2]
    except OSError:
        return None
    return kind


def local_capture_unavailable_reason() -> str | None:
    """None where the local redirector can run; otherwise what is missing.

    On macOS and Windows mitmproxy brings its own redirector (a system extension, WinDivert)
    and says itself what it needs, so only Linux is checked here.
    """
    if not sys.platform.startswith("linux"):
        return None
    kind = _cgroup_root_type()
    if kind != "cgroup2":
        return (
            f"mitmproxy's redirector attaches to a cgroup v2 hierarchy at {CGROUP_ROOT}, "
            f"which is {kind or 'not mounted'} here; use --capture transparent"
        )
    if not os.path.exists(KERNEL_BTF):
        return (
            f"the kernel has no BPF type information ({KERNEL_BTF}), which mitmproxy's "
            "redirector needs; use --capture transparent"
        )
    if shutil.which("sudo") is None:
        return "mitmproxy starts its redirector with sudo, and there is no sudo here"
    return None
