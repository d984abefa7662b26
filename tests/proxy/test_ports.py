"""The ports freezeframe chooses for processes it starts (the demo, the pytest plugin)."""

from __future__ import annotations

import socket
from pathlib import Path

from freezeframe.proxy.ports import unused_port


def test_a_chosen_port_is_free_and_never_one_an_outgoing_connection_could_take() -> None:
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    chosen = {unused_port() for _ in range(50)}
    assert all(port < first_ephemeral for port in chosen), sorted(chosen)
    assert len(chosen) > 40, "spread over the range, not one port every time"
    for port in list(chosen)[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
