"""The host side of a command's own network namespace: start it, serve it, say what it blocked.

``sandbox.nsinit`` makes the namespace and hands back sockets that live in it. This module
serves them from freezeframe's event loop, in the host's namespace:

* the proxy's port inside the namespace (127.0.0.1:PORT) is relayed to the real proxy, so
  the command's ``HTTPS_PROXY`` is the same URL as without a namespace;
* the namespace's DNS answers every name with an address from the :class:`AddressBook`
  (offline, in replay too; nothing is asked of the host's resolver), so a connection that
  is refused can be named and a captured one can be replayed by name;
* raw sockets report every refusal the kernel makes in the namespace (a TCP reset to a
  connection attempt, an ICMP port-unreachable to a datagram), which is logged with the
  destination: a command that went around the proxy is never silent.

Nothing here changes the host: no firewall rule, no named namespace, no file. The namespace
ends with the last process in it; the capture link with the proxy that owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import socket
import struct
import sys
from collections.abc import Callable, Sequence

import mitmproxy_rs
from mitmproxy import dns
from mitmproxy.net.dns import classes, response_codes, types

from freezeframe.addons.capture import AddressBook
from freezeframe.proxy.serve import StartupError
from freezeframe.sandbox.nsinit import MESSAGE_SIZE
from freezeframe.sandbox.rtnetlink import Netlink

log = logging.getLogger("freezeframe.netns")

HANDSHAKE_TIMEOUT = 15.0
RELAY_CONNECT_TIMEOUT = 10.0
RELAY_CHUNK = 256 * 1024
DNS_TTL = 60
SOCKETS = 6  # listener, dns, tcp4, tcp6, icmp4, icmp6: the order sandbox.nsinit sends them in


_Parser = Callable[[bytes, str], tuple[str, int] | None]


class Unavailable(Exception):
    """No namespace can be made here; the message says why, in one line."""


class CommandFailed(StartupError):
    """The namespace was made but the command could not be started (one line)."""


def unavailable_reason() -> str | None:
    """Why no namespace can be made, as far as can be told without trying; else None."""
    if not sys.platform.startswith("linux"):
        return "network namespaces exist only on Linux"
    if os.geteuid() != 0:
        try:
            with open("/proc/sys/user/max_user_namespaces") as file:
                if int(file.read().strip() or 0) == 0:
                    return "user namespaces are disabled (user.max_user_namespaces is 0)"
        except OSError:
            pass
    return None


def capture_unavailable_reason() -> str | None:
    """Transparent capture moves a link between namespaces: root's work."""
    if reason := unavailable_reason():
        return reason
    if os.geteuid() != 0:
        return "it needs root (CAP_NET_ADMIN) to create the capture link"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun does not exist"
    return mitmproxy_rs.tun.TunInterface.unavailable_reason()


class Sandbox:
    """One command in its own network namespace, for the life of one ``exec``.

    ``network`` is ``isolate`` (nothing reachable but the proxy) or ``capture`` (everything
    through ``link``, the proxy's capture interface, which is moved into the namespace);
    ``none`` makes no namespace, only holds the command until :meth:`go` (``--capture
    local`` needs its pid before it runs).
    """

    def __init__(
        self,
        network: str,
        proxy: tuple[str, int],
        addresses: AddressBook,
        link: str | None = None,
    ) -> None:
        self._network = network
        self._proxy = proxy
        self._addresses = addresses
        self._link = link
        self._control: socket.socket | None = None
        self._relay: asyncio.Server | None = None
        self._closers: list[Callable[[], None]] = []

    async def spawn(
        self, command: Sequence[str], env: dict[str, str]
    ) -> asyncio.subprocess.Process:
        """Start the command's process in its namespace, held before the command runs
        until :meth:`go`; raise :class:`Unavailable` if no namespace can be made."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        config = {"control": theirs.fileno(), "network": self._network, "port": self._proxy[1]}
        try:
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-m",
                "freezeframe.sandbox.nsinit",
                json.dumps(config),
                "--",
                *command,
                env=env,
                pass_fds=[theirs.fileno()],
            )
        finally:
            theirs.close()
        try:
            await asyncio.wait_for(self._prepare(child.pid), HANDSHAKE_TIMEOUT)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
            raise
        return child

    async def go(self) -> None:
        """Let the held process become the command; raise if the command cannot run."""
        self._send({"go": True})
        message, _ = await asyncio.wait_for(self._receive(), HANDSHAKE_TIMEOUT)
        if "error" in message:  # otherwise the exec closed the channel: the command runs
            raise CommandFailed(str(message["error"]))

    async def _receive(self) -> tuple[dict[str, object], list[int]]:
        assert self._control is not None
        loop = asyncio.get_running_loop()
        data, fds, _, _ = await loop.run_in_executor(
            None, socket.recv_fds, self._control, MESSAGE_SIZE, SOCKETS
        )
        if not data:
            return {}, fds
        message = json.loads(data)
        assert isinstance(message, dict)
        return message, fds

    async def _prepare(self, pid: int) -> None:
        message, fds = await self._receive()
        if "link" in message:
            assert self._link is not None
            try:
                with Netlink() as netlink:
                    netlink.move_link(self._link, pid)
            except OSError as exc:
                raise Unavailable(f"cannot move the capture interface in: {exc.strerror}") from None
            self._send({"link": self._link})
            message, fds = await self._receive()
        if "unavailable" in message:
            raise Unavailable(str(message["unavailable"]))
        expected = 0 if self._network == "none" else SOCKETS
        if not message.get("ready") or len(fds) != expected:
            for fd in fds:
                os.close(fd)
            raise Unavailable("the namespace helper stopped before it was ready")
        if fds:
            await self._serve([socket.socket(fileno=fd) for fd in fds])

    def _send(self, message: dict[str, object]) -> None:
        assert self._control is not None
        self._control.send(json.dumps(message).encode())

    async def _serve(self, sockets: list[socket.socket]) -> None:
        listener, resolver, tcp4, tcp6, icmp4, icmp6 = sockets
        loop = asyncio.get_running_loop()
        self._relay = await asyncio.start_server(self._relay_one, sock=listener)
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Resolver(self._addresses), sock=resolver
        )
        self._closers.append(transport.close)
        for sock, parse, kind in (
            (tcp4, _refused_tcp4, "connection"),
            (tcp6, _refused_tcp6, "connection"),
            (icmp4, _refused_udp4, "UDP datagram"),
            (icmp6, _refused_udp6, "UDP datagram"),
        ):
            sock.setblocking(False)
            loop.add_reader(sock.fileno(), self._observe, sock, parse, kind)
            self._closers.append(_closer(loop, sock))

    def _observe(self, sock: socket.socket, parse: _Parser, kind: str) -> None:
        """Log each refusal the kernel made in the namespace, by destination."""
        while True:
            try:
                packet, source = sock.recvfrom(65535)
            except OSError:  # BlockingIOError included: nothing more to read now
                return
            refused = parse(packet, source[0])
            if refused is not None:
                log.warning(
                    "blocked a direct %s from the command to %s: it did not go through "
                    "freezeframe, so it was neither recorded nor replayed",
                    kind,
                    self._addresses.describe(*refused),
                )

    async def _relay_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection to the proxy's port in the namespace, carried to the real proxy."""
        try:
            proxy_reader, proxy_writer = await asyncio.wait_for(
                asyncio.open_connection(*self._proxy), RELAY_CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError) as exc:
            log.warning("cannot reach the proxy at %s:%d: %s", *self._proxy, exc)
            writer.close()
            return
        try:
            await asyncio.gather(_pump(reader, proxy_writer), _pump(proxy_reader, writer))
        finally:
            writer.close()
            proxy_writer.close()

    async def close(self) -> None:
        """Stop serving the namespace; the namespace itself ends with its last process."""
        if self._relay is not None:
            self._relay.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._relay.wait_closed(), 2.0)
        for close in self._closers:
            close()
        if self._control is not None:
            self._control.close()


def _closer(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> Callable[[], None]:
    def close() -> None:
        loop.remove_reader(sock.fileno())
        sock.close()

    return close


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction; an end is passed on as an end, a reset as an abort."""
    try:
        while data := await reader.read(RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()


class _Resolver(asyncio.DatagramProtocol):
    """The namespace's DNS: an address from the book for every name, asked of no one."""

    def __init__(self, addresses: AddressBook) -> None:
        self._addresses = addresses
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.DatagramTransport)
        self._transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        try:
            query = dns.DNSMessage.unpack(data)
        except (struct.error, ValueError):
            return
        answers = []
        for question in query.questions:
            if question.type == types.A and question.class_ == classes.IN:
                try:
                    address = self._addresses.address_of(question.name)
                except ValueError as exc:
                    log.warning("%s", exc)
                    self._reply(query.fail(response_codes.SERVFAIL), addr)
                    return
                answers.append(dns.ResourceRecord.A(question.name, address, ttl=DNS_TTL))
        # AAAA and every other type: "no such record" (NOERROR, empty), so clients use IPv4.
        self._reply(query.succeed(answers), addr)

    def _reply(self, message: dns.DNSMessage, addr: tuple[str | object, ...]) -> None:
        if self._transport is not None:
            self._transport.sendto(message.packed, addr)


def _tcp_refusal(segment: bytes) -> int | None:
    """The port a connection was refused on, for a reset that answers a SYN (seq 0)."""
    if len(segment) < 20:
        return None
    source_port, _, seq, _, flags = struct.unpack_from("!HHIIxB", segment)
    return source_port if flags & 0x04 and flags & 0x10 and seq == 0 else None


def _refused_tcp4(packet: bytes, source: str) -> tuple[str, int] | None:
    header = (packet[0] & 0x0F) * 4 if packet else 0
    port = _tcp_refusal(packet[header:])
    return None if port is None else (source, port)


def _refused_tcp6(segment: bytes, source: str) -> tuple[str, int] | None:
    port = _tcp_refusal(segment)
    return None if port is None else (source.split("%")[0], port)


def _refused_udp4(packet: bytes, _source: str) -> tuple[str, int] | None:
    """ICMP port unreachable (type 3, code 3) quoting a UDP datagram's header."""
    header = (packet[0] & 0x0F) * 4 if packet else 0
    icmp = packet[header:]
    if len(icmp) < 8 + 20 + 4 or icmp[0] != 3 or icmp[1] != 3:
        return None
    inner = icmp[8:]
    inner_header = (inner[0] & 0x0F) * 4
    if inner[9] != socket.IPPROTO_UDP or len(inner) < inner_header + 4:
        return None
    (port,) = struct.unpack_from("!H", inner, inner_header + 2)
    return str(ipaddress.IPv4Address(inner[16:20])), port


def _refused_udp6(icmp: bytes, _source: str) -> tuple[str, int] | None:
    """ICMPv6 port unreachable (type 1, code 4) quoting a UDP datagram's header."""
    if len(icmp) < 8 + 40 + 4 or icmp[0] != 1 or icmp[1] != 4 or icmp[8 + 6] != 17:
        return None
    (port,) = struct.unpack_from("!H", icmp, 8 + 40 + 2)
    return str(ipaddress.IPv6Address(icmp[8 + 24 : 8 + 40])), port
