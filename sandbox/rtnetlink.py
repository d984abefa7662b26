"""The few rtnetlink requests a command's network namespace needs, without ``ip``.

Bringing a link up, giving it an address, adding a route and moving a link into another
namespace are one netlink message each. Sending them from Python keeps the namespace
helper free of external tools and, more importantly, keeps its capabilities: in an
unprivileged user namespace the helper holds CAP_NET_ADMIN only until it executes
something, so an ``ip`` child (or the command) would lose it. The message layouts are
those of ``linux/rtnetlink.h`` and ``linux/if_addr.h``; every request asks for an
acknowledgement, so a refusal surfaces here as ``OSError`` with the kernel's errno.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

RTM_NEWLINK = 16
RTM_NEWADDR = 20
RTM_NEWROUTE = 24
NLMSG_ERROR = 2
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
IFF_UP = 0x1
IFLA_NET_NS_PID = 19
IFA_ADDRESS = 1
IFA_LOCAL = 2
IFA_F_NODAD = 0x02  # an IPv6 address usable at once, not "tentative" for a second
RTA_DST = 1
RTA_OIF = 4
RT_TABLE_MAIN = 254
RT_TABLE_LOCAL = 255
RTPROT_STATIC = 4
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RT_SCOPE_HOST = 254
RTN_UNICAST = 1
RTN_LOCAL = 2

_HEADER = struct.Struct("=IHHII")


def _attr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * (-length % 4)


class Netlink:
    """One rtnetlink socket in the namespace of the thread that opened it."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.settimeout(5.0)
        self._sock.bind((0, 0))
        self._seq = 0

    def __enter__(self) -> Netlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def _request(self, kind: int, flags: int, body: bytes) -> None:
        self._seq += 1
        flags |= NLM_F_REQUEST | NLM_F_ACK
        self._sock.send(_HEADER.pack(_HEADER.size + len(body), kind, flags, self._seq, 0) + body)
        while True:
            data = self._sock.recv(65536)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, msg_type, _, seq, _ = _HEADER.unpack_from(data, offset)
                if msg_type == NLMSG_ERROR and seq == self._seq:
                    (error,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                    if error:
                        raise OSError(-error, os.strerror(-error))
                    return
                offset += max(length, _HEADER.size) + (-length % 4)

    def link_up(self, name: str) -> None:
        index = socket.if_nametoindex(name)
        self._request(RTM_NEWLINK, 0, struct.pack("=BxHiII", 0, 0, index, IFF_UP, IFF_UP))

    def move_link(self, name: str, pid: int) -> None:
        """Move a link into the network namespace of process ``pid``."""
        index = socket.if_nametoindex(name)
        body = struct.pack("=BxHiII", 0, 0, index, 0, 0) + _attr(
            IFLA_NET_NS_PID, struct.pack("=I", pid)
        )
        self._request(RTM_NEWLINK, 0, body)

    def add_address(self, name: str, network: str) -> None:
        """``network`` such as ``198.18.0.2/32``; IPv6 addresses skip duplicate detection."""
        net = ipaddress.ip_interface(network)
        family = socket.AF_INET if net.version == 4 else socket.AF_INET6
        flags = IFA_F_NODAD if net.version == 6 else 0
        body = struct.pack(
            "=BBBBI",
            family,
            net.network.prefixlen,
            flags,
            RT_SCOPE_UNIVERSE,
            socket.if_nametoindex(name),
        )
        packed = net.ip.packed
        body += _attr(IFA_LOCAL, packed) + _attr(IFA_ADDRESS, packed)
        self._request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body)

    def add_route(self, name: str, destination: str, *, local: bool = False) -> None:
        """A route to ``destination`` (``0.0.0.0/0``, ``::/0``) out of link ``name``.

        ``local=True`` makes every address in ``destination`` an address of this host
        (the kernel's "AnyIP"): a connection to any of them is answered here, by a
        listener or by the kernel's refusal, instead of leaving through a link.
        """
        net = ipaddress.ip_network(destination)
        family = socket.AF_INET if net.version == 4 else socket.AF_INET6
        table, scope, kind = (
            (RT_TABLE_LOCAL, RT_SCOPE_HOST, RTN_LOCAL)
            if local
            else (RT_TABLE_MAIN, RT_SCOPE_LINK, RTN_UNICAST)
        )
        body = struct.pack(
            "=BBBBBBBBI", family, net.prefixlen, 0, 0, table, RTPROT_STATIC, scope, kind, 0
        )
        if net.prefixlen:
            body += _attr(RTA_DST, net.network_address.packed)
        body += _attr(RTA_OIF, struct.pack("=i", socket.if_nametoindex(name)))
        self._request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body)
