"""A port for a process freezeframe starts itself (the demo's proxy, the pytest plugin's).

A port the kernel hands out for ``bind(0)`` comes from its ephemeral range, the one it
also takes the local end of every outgoing connection from: between choosing a port and the
child binding it, a busy machine's next connection could take it ("Address already in use").
A port below that range is never given to a connection, so only another listener can take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_TRIES = 100


def first_ephemeral() -> int:
    """The lowest port of the kernel's ephemeral range; 0 where it cannot be read."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def unused_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host``, below the ephemeral range where there is one."""
    first = first_ephemeral()
    if first - _LOWEST >= 1000:
        for _ in range(_TRIES):
            port = random.randrange(_LOWEST, first)
            if _bindable(host, port):
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
