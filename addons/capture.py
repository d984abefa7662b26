"""Traffic that reached freezeframe without asking: transparent capture, and raw TCP/UDP.

A client that ignores every proxy setting still resolves a name and connects to an address.
In ``exec --capture transparent`` the namespace's resolver answers each name with an address
of its own from 198.18.0.0/15 (the benchmarking range, never routed), kept in the
:class:`AddressBook`, so that when the connection arrives here the name it was meant for is
known exactly. This addon makes such a flow look the way an ``HTTPS_PROXY`` client's would:
the request's host is that name (or the TLS SNI, or the ``Host`` header, for an address the
client found elsewhere), so the URL, the request key and the upstream connection are those
of a ``CONNECT name:port``. A recording made one way replays the other way.

It also keeps two promises that proxy mode alone never had to: replay opens no raw TCP
connection (a database protocol through ``CONNECT``, or anything captured that is not
HTTP), and captured UDP (QUIC, a resolver of the client's own) is refused, so the client
falls back to TCP, which is recorded. Each such refusal is logged with its destination.
"""

from __future__ import annotations

import ipaddress
import logging

from mitmproxy import connection, http, tcp, udp
from mitmproxy.proxy import layers, mode_specs, server_hooks
from mitmproxy.proxy.layer import NextLayer

from freezeframe.addons.state import Mode, RuntimeState

log = logging.getLogger("freezeframe.capture")

POOL = ipaddress.IPv4Network("198.18.0.0/15")
FIRST_POOLED = 16  # below: the resolver's and the capture link's own addresses
TRANSPARENT_MODES = (mode_specs.TunMode, mode_specs.LocalMode, mode_specs.TransparentMode)


class AddressBook:
    """The names a captured command resolved, each with an address of its own.

    The same name always gets the same address, and an address never changes its name,
    for the life of one ``exec``: a client that caches an answer stays right.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, ipaddress.IPv4Address] = {}
        self._by_address: dict[ipaddress.IPv4Address, str] = {}

    def address_of(self, name: str) -> ipaddress.IPv4Address:
        key = name.rstrip(".").lower()
        if key not in self._by_name:
            index = FIRST_POOLED + len(self._by_name)
            if index >= POOL.num_addresses - 1:
                raise ValueError("the namespace resolved more names than it has addresses for")
            address = POOL.network_address + index
            self._by_name[key] = address
            self._by_address[address] = key
        return self._by_name[key]

    def name_of(self, address: str) -> str | None:
        """The name behind one of the book's addresses; None for any other address."""
        try:
            return self._by_address.get(ipaddress.IPv4Address(address))
        except ValueError:
            return None

    @staticmethod
    def is_pooled(address: str) -> bool:
        try:
            return ipaddress.ip_address(address) in POOL
        except ValueError:
            return False

    def describe(self, address: str, port: int) -> str:
        """``name:port`` when the address stands for a name, else ``address:port``."""
        name = self.name_of(address)
        host = name or (f"[{address}]" if ":" in address else address)
        return f"{host}:{port}"


def is_captured(client: connection.Client) -> bool:
    return isinstance(client.proxy_mode, TRANSPARENT_MODES)


class Capture:
    def __init__(self, state: RuntimeState, addresses: AddressBook) -> None:
        self._state = state
        self._addresses = addresses
        self._passed: set[str] = set()
        #: requests seen, so ``exec`` can say when a recording run saw none at all
        self.requests = 0

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """Name the destination as an ``HTTPS_PROXY`` client's ``CONNECT`` would have."""
        self.requests += 1
        if not is_captured(flow.client_conn):
            return
        request = flow.request
        name = (
            self._addresses.name_of(request.host)
            or flow.client_conn.sni
            or _host_of(request.host_header)
            or request.host
        )
        request.data.host = name.rstrip(".").lower()

    def next_layer(self, nextlayer: NextLayer) -> None:
        """Captured UDP is never interpreted (as QUIC or anything else): it is refused."""
        context = nextlayer.context
        if context.client.transport_protocol == "udp" and is_captured(context.client):
            nextlayer.layer = layers.UDPLayer(context)

    def udp_start(self, flow: udp.UDPFlow) -> None:
        where = self._describe(flow.server_conn)
        log.warning("refused UDP from the command to %s; clients fall back to TCP", where)
        flow.server_conn.error = f"freezeframe refuses captured UDP to {where}"

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        where = self._describe(flow.server_conn)
        if self._state.mode is Mode.REPLAY:
            log.warning("replay: refused a connection to %s that is not HTTP", where)
            flow.server_conn.error = f"freezeframe replays HTTP only; refused {where}"
        elif where not in self._passed:
            self._passed.add(where)
            log.warning("a connection to %s is not HTTP: passed through, not recorded", where)

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """An address from the book is never dialled: its name is."""
        address = data.server.address
        if address is None or not self._addresses.is_pooled(address[0]):
            return
        name = self._addresses.name_of(address[0])
        if name is None:
            data.server.error = f"{address[0]} stands for no name the command resolved"
        else:
            data.server.address = (name, address[1])

    def _describe(self, server: connection.Server) -> str:
        if server.address is None:
            return "an unknown destination"
        return self._addresses.describe(server.address[0], server.address[1])


def _host_of(host_header: str | None) -> str | None:
    """The host part of a ``Host`` header, or None when it is missing or an address."""
    if not host_header:
        return None
    host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    return None
