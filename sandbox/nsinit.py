"""Runs inside the command's own network namespace: sets it up, then becomes the command.

``freezeframe exec`` starts ``python -I -m sandbox.nsinit CONFIG -- COMMAND...`` with the
command's environment. This process makes the namespaces (a user namespace too when it is
not root, so that no privilege is needed where the kernel allows it), and then:

* gives the namespace a resolver of freezeframe's: ``/etc/resolv.conf`` names 127.0.0.53,
  ``/etc/hosts`` holds only ``localhost`` (bind mounts in a private mount namespace, so the
  host's files never change), and the sockets of host resolver daemons are hidden;
* ``isolate``: makes every address local (the kernel's AnyIP), so a connection to anything
  but a listener in the namespace is refused at once, by the kernel, and never leaves;
  ``capture``: routes everything through the capture link that freezeframe moved in;
* opens the sockets freezeframe serves from the host side (file descriptors cross
  namespaces, so no relay process is needed): the proxy's port on 127.0.0.1, the DNS port,
  and raw sockets that see the kernel's refusals, so each one can be logged with its
  destination;
* waits for freezeframe's ``go`` and executes the command in its place (same pid).

It imports the standard library only, and starts fast: it runs before every isolated
command. Its capabilities end with the ``exec``; the command runs with the caller's uid.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Sequence

from freezeframe.sandbox.rtnetlink import Netlink

DNS_ADDRESS = "127.0.0.53"
CAPTURE_ADDRESSES = ("198.18.0.2/32", "fdff:ff::2/128")  # the capture link's own, never pooled
RESOLVER_SOCKETS = (
    "/run/systemd/resolve/io.systemd.Resolve",  # nss-resolve would ask the host's resolver
    "/run/nscd/socket",
    "/var/run/nscd/socket",
)
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
SO_ATTACH_FILTER = 26
MESSAGE_SIZE = 65536
#: Classic BPF programs that keep only TCP segments with RST set (the kernel's refusals), so
#: the proxy's own traffic through the namespace's loopback is never copied to freezeframe.
#: An IPv4 raw socket sees the IP header first: ldxb 4*([0]&0xf); ldb [x+13]; jset #0x04;
#: ret #0xffff; ret #0. An IPv6 one sees the TCP header first: ldb [13]; jset #0x04; ...
_RST_FILTER_V4 = (
    (0xB1, 0, 0, 0),
    (0x50, 0, 0, 13),
    (0x45, 0, 1, 0x04),
    (0x06, 0, 0, 0xFFFF),
    (0x06, 0, 0, 0),
)
_RST_FILTER_V6 = ((0x30, 0, 0, 13), (0x45, 0, 1, 0x04), (0x06, 0, 0, 0xFFFF), (0x06, 0, 0, 0))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Unavailable(Exception):
    """The kernel or the system does not allow the namespace: the one-line reason."""


def _libc_call(name: str, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def encode(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    _libc_call("mount", encode(source), encode(target), encode(fstype), flags, encode(data))


def make_namespaces() -> None:
    """New network and mount namespaces; as a non-root user, inside a new user namespace
    that maps the caller's own uid and gid (the command keeps its identity)."""
    uid, gid = os.getuid(), os.getgid()
    flags = os.CLONE_NEWNET | os.CLONE_NEWNS
    try:
        if uid == 0:
            os.unshare(flags)
            return
        os.unshare(flags | os.CLONE_NEWUSER)
        for name, line in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(line)
    except OSError as exc:
        how = "unshare" if uid == 0 else "an unprivileged user namespace"
        raise Unavailable(f"{how} is not allowed here ({exc.strerror})") from None


def replace_resolver() -> None:
    """Point name resolution at freezeframe's DNS, in this mount namespace only.

    The two files live on a tmpfs that is mounted over /tmp just long enough to bind them
    into place, so nothing is written to the host's disk and nothing is left to remove.
    """
    for path in ("/etc/resolv.conf", "/etc/hosts"):
        if not os.path.exists(path):
            raise Unavailable(
                f"{path} does not exist, so the namespace's resolver cannot replace it"
            )
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates to the host
    _mount("freezeframe", "/tmp", "tmpfs", 0, "size=64k,mode=0755")
    with open("/tmp/resolv.conf", "w") as file:
        file.write(f"nameserver {DNS_ADDRESS}\noptions attempts:1 timeout:2\n")
    with open("/tmp/hosts", "w") as file:
        file.write(f"127.0.0.1\tlocalhost {socket.gethostname()}\n")
        file.write("::1\tlocalhost ip6-localhost ip6-loopback\n")
    _mount("/tmp/resolv.conf", "/etc/resolv.conf", None, MS_BIND)
    _mount("/tmp/hosts", "/etc/hosts", None, MS_BIND)
    _libc_call("umount2", b"/tmp", MNT_DETACH)
    for path in RESOLVER_SOCKETS:
        if os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)


def _raw(
    family: int, proto: int, program: Sequence[tuple[int, int, int, int]] = ()
) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_RAW, proto)
    if program:
        code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in program))
        fprog = _SockFprog(len(program), ctypes.addressof(code))
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(fprog))  # the kernel copies it
    return sock


def open_sockets(port: int) -> list[socket.socket]:
    """The proxy's port, the DNS port, and the four observers of refusals, in that order."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind((DNS_ADDRESS, 53))
    return [
        listener,
        dns,
        _raw(socket.AF_INET, socket.IPPROTO_TCP, _RST_FILTER_V4),
        _raw(socket.AF_INET6, socket.IPPROTO_TCP, _RST_FILTER_V6),
        _raw(socket.AF_INET, socket.IPPROTO_ICMP),
        _raw(socket.AF_INET6, socket.IPPROTO_ICMPV6),
    ]


def _send(control: socket.socket, message: dict[str, object], fds: Sequence[int] = ()) -> None:
    socket.send_fds(control, [json.dumps(message).encode()], list(fds))


def _receive(control: socket.socket) -> dict[str, object]:
    data = control.recv(MESSAGE_SIZE)
    if not data:
        sys.exit(1)  # freezeframe went away: do not run the command unwatched
    message = json.loads(data)
    assert isinstance(message, dict)
    return message


def host_unix_sockets() -> list[str]:
    """The paths of the Unix sockets bound in this network namespace, from the kernel's
    table (``/proc/net/unix``, read before leaving it: the table is per namespace)."""
    found = []
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="surrogateescape") as table:
            next(table, None)  # the column names
            for line in table:
                fields = line.rstrip("\n").split(None, 7)
                if len(fields) == 8 and fields[7].startswith("/"):
                    found.append(fields[7])
    except OSError:
        return []
    return found


def hide_sockets(paths: Sequence[str]) -> None:
    """Cover each host socket with ``/dev/null`` in this mount namespace: a connect() to it
    is refused, so an isolated command reaches no database, Docker or desktop daemon
    (psycopg went through ``/var/run/postgresql`` and a replayed run repeated its writes).
    Abstract sockets need nothing: they belong to the network namespace, which is new. A
    socket this user could not reach anyway is left as it is."""
    for path in dict.fromkeys(paths):
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                _mount("/dev/null", path, None, MS_BIND)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTDIR):
                raise


def prepare(control: socket.socket, network: str, port: int) -> list[socket.socket]:
    sockets = host_unix_sockets() if network == "isolate" else []
    make_namespaces()
    replace_resolver()
    hide_sockets(sockets)
    with Netlink() as netlink:
        netlink.link_up("lo")
        if network == "isolate":
            netlink.add_route("lo", "0.0.0.0/0", local=True)
            netlink.add_route("lo", "::/0", local=True)
        else:
            _send(control, {"link": "wanted"})  # freezeframe moves it into this namespace
            link = str(_receive(control)["link"])
            netlink.link_up(link)
            for address in CAPTURE_ADDRESSES:
                netlink.add_address(link, address)
            netlink.add_route(link, "0.0.0.0/0")
            netlink.add_route(link, "::/0")
    return open_sockets(port)


def main(argv: Sequence[str]) -> None:
    config = json.loads(argv[0])
    command = list(argv[2:])  # argv[1] is "--"
    control = socket.socket(fileno=int(config["control"]))
    os.set_inheritable(control.fileno(), False)
    sockets: list[socket.socket] = []
    if config["network"] != "none":
        try:
            sockets = prepare(control, str(config["network"]), int(config["port"]))
        except Unavailable as exc:
            _send(control, {"unavailable": str(exc)})
            sys.exit(1)
        except OSError as exc:
            _send(
                control, {"unavailable": f"setting up the namespace failed: {exc.strerror or exc}"}
            )
            sys.exit(1)
    _send(control, {"ready": True}, [sock.fileno() for sock in sockets])
    for sock in sockets:
        sock.close()  # freezeframe holds them now; the command must not inherit them
    _receive(control)  # "go"
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        _send(control, {"error": f"cannot run {command[0]!r}: {exc.strerror or exc}"})
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
