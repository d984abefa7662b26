"""Finding the running proxy, and the CA its clients must trust, from any directory.

``env``, ``ca`` and ``exec --proxy`` used to look for the CA under ``./.freezeframe``, so run
from another directory they quietly made a new CA there that the proxy never used, and the
agent failed with a bare connection error. The running proxy knows where its CA is: these
commands ask its admin API (``GET /health``). A ``--data-dir`` given explicitly still wins,
for a proxy whose files are mounted somewhere else; nothing here ever creates a CA.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freezeframe.proxy.settings import CA_FILENAME, Address

HEALTH_TIMEOUT_S = 3.0
ACCEPT_WAIT_S = 2.0
"""How long the far end of the admin port may take to accept a connection before its owner
can be read (a busy machine's proxy accepts late; a port that never does is nobody's)."""
ACCEPT_POLL_S = 0.002
LOOKUP_TIMEOUT_S = 1.0
"""How long a read command waits for a proxy that took the connection to answer: on this
machine a proxy answers /health in milliseconds, and no proxy refuses at once."""


class NoProxyFound(Exception):
    """Neither a running proxy nor a data dir says where the CA is; the message is one line."""


class TokenNeeded(NoProxyFound):
    """A proxy answers, but tells only a client with its admin token where its CA is."""


class NotYourProxy(NoProxyFound):
    """What answers on the admin port belongs to another user than this one or root."""


@dataclass(frozen=True, slots=True)
class Trust:
    """The CA a client must trust, and a bundle of it with the system's CAs (for
    ``SSL_CERT_FILE``, which replaces a client's trust store rather than adding to it)."""

    ca: Path
    bundle: Path


def admin_url(admin: Address) -> str:
    return f"http://{admin.url_host}:{admin.port}"


def admin_headers(token: str | None) -> dict[str, str]:
    """The headers that carry the admin token, when there is one."""
    return {"authorization": f"Bearer {token}"} if token else {}


def running(admin: Address, token: str | None = None) -> dict[str, Any]:
    """The ``/health`` document of the proxy whose admin API is at ``admin``."""
    document = _health(admin, token, HEALTH_TIMEOUT_S)
    if isinstance(document, dict) and "proxy" not in document and "admin_token" in document:
        given = "the one given is wrong" if token else "none was given"
        raise TokenNeeded(
            f"the freezeframe at {admin_url(admin)} asks for its admin token and {given}; "
            "set FREEZEFRAME_ADMIN_TOKEN or pass --admin-token"
        )
    if not isinstance(document, dict) or "proxy" not in document:
        raise NoProxyFound(
            f"no freezeframe answers at {admin_url(admin)}; start one with `freezeframe run`, "
            "or pass --admin"
        )
    return document


WAIT_POLL_S = 0.1
"""How often ``env --wait`` asks a starting proxy again: it binds in about a second."""


def wait_running(admin: Address, token: str | None, seconds: float) -> dict[str, Any]:
    """``running``, asked again until ``seconds`` have passed: the README's
    ``freezeframe run ... &`` then ``eval "$(freezeframe env --wait 30)"`` asks while the
    proxy is still starting. A proxy that wants a token is an answer, not a reason to wait.
    The admin API starts after the proxy port, so an answer means the proxy listens too."""
    deadline = time.monotonic() + max(seconds, 0.0)
    while True:
        try:
            return running(admin, token)
        except TokenNeeded:
            raise
        except NoProxyFound as exc:
            if time.monotonic() + WAIT_POLL_S > deadline:
                if seconds > 0:
                    raise NoProxyFound(f"{exc} (waited {seconds:g} s)") from None
                raise
        time.sleep(WAIT_POLL_S)


def _health(admin: Address, token: str | None, timeout: float) -> Any:
    """The JSON of ``GET /health``, or None when nothing answers it with JSON. The standard
    library's client, not httpx: the read commands ask this first and must answer at once,
    and a loopback GET needs no proxy settings, pool or HTTP/2."""
    host = admin.url_host.strip("[]")
    connection = http.client.HTTPConnection(host, admin.port, timeout=timeout)
    try:
        connection.connect()
        assert connection.sock is not None
        owner, me = listener_owner(connection.sock), os.geteuid()
        if owner is not None and owner not in (me, 0):
            you = "root" if me == 0 else f"{_user(me)}, or root"
            raise NotYourProxy(
                f"what answers at {admin_url(admin)} belongs to {_user(owner)}, not to you "
                f"({you}): freezeframe trusts no other user's proxy with its CA, store or "
                "environment; start your own, or pass --admin"
            )
        connection.request("GET", "/health", headers=admin_headers(token))
        return json.loads(connection.getresponse().read())
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


def listener_owner(sock: socket.socket) -> int | None:
    """The uid that owns the far end of a TCP connection ``sock`` made on this machine, from
    the kernel's socket table (``/proc/net/tcp``, ``tcp6``): an accepted socket carries the
    uid of whoever opened the listening one. None when the far end is not in this network
    namespace's table (another host, a container) or there is no such table (not Linux).

    A local user who binds the admin port before the proxy does (or after it stopped) answers
    ``/health`` like it and names his own proxy and CA: ``env`` then printed his
    ``HTTPS_PROXY`` (a man in the middle of every API key), and run as root, wrote a trust
    store into the directory he named. A proxy run by this user, or by root (a system
    service, docker's port forwarder), is believed; another user's is not.

    Until the far end accepts the connection, the kernel has no socket to read an owner from
    and lists it as root's (inode 0): that is waited out, up to ``ACCEPT_WAIT_S``, and a port
    that never accepts raises OSError, so nothing (the admin token least) is sent to it."""
    family = sock.family
    if family not in (socket.AF_INET, socket.AF_INET6):
        return None
    far, near = sock.getpeername(), sock.getsockname()
    wanted = (_proc_address(family, far[0], far[1]), _proc_address(family, near[0], near[1]))
    table = "/proc/net/tcp" if family == socket.AF_INET else "/proc/net/tcp6"
    deadline = time.monotonic() + ACCEPT_WAIT_S
    while True:
        try:
            found = _far_end(table, wanted)
        except OSError:
            return None
        if found is None:
            return None
        uid, inode = found
        if inode != 0:
            return uid
        if time.monotonic() > deadline:
            raise OSError(f"the far end of {far[0]}:{far[1]} did not accept the connection")
        time.sleep(ACCEPT_POLL_S)


def _far_end(table: str, wanted: tuple[str, str]) -> tuple[int, int] | None:
    """The uid and inode of the socket ``wanted`` (its local and remote address) names."""
    with open(table, encoding="ascii") as lines:
        next(lines, None)  # the column names
        for line in lines:
            fields = line.split()
            if (fields[1], fields[2]) == wanted:
                return int(fields[7]), int(fields[9])
    return None


def _proc_address(family: int, host: str, port: int) -> str:
    """An address as ``/proc/net/tcp`` spells it: each 32-bit word of the address read in
    the machine's byte order and printed in hex (the kernel's ``%08X``), then the port."""
    packed = socket.inet_pton(family, host.partition("%")[0])
    words = (packed[i : i + 4] for i in range(0, len(packed), 4))
    spelled = "".join(f"{int.from_bytes(word, sys.byteorder):08X}" for word in words)
    return f"{spelled}:{port:04X}"


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


@dataclass(frozen=True, slots=True)
class RunningStore:
    """The store and data dir of the proxy answering at ``admin`` (its URL, password masked)."""

    admin: str
    data_dir: Path
    url: str


def store_of_running(admin: Address, token: str | None = None) -> RunningStore | None:
    """Where the proxy at ``admin`` keeps its store, or None when no proxy answers there.

    Read commands run from another directory than the proxy's found no store, or an old
    one, and listed nothing: the running proxy's store is the one its traffic went to.
    Raises TokenNeeded when the proxy answers but keeps that to clients with its token, and
    NoProxyFound when its store's URL holds a password it does not show."""
    document = _health(admin, token, LOOKUP_TIMEOUT_S)
    if not isinstance(document, dict):
        return None
    if "store" not in document:
        if "admin_token" in document:
            given = "the one given is wrong" if token else "none was given"
            raise TokenNeeded(
                f"the freezeframe at {admin_url(admin)} asks for its admin token and {given}; "
                "set FREEZEFRAME_ADMIN_TOKEN, or pass --data-dir or --store"
            )
        return None
    url = str(document["store"])
    if ":***@" in url:
        raise NoProxyFound(
            f"the freezeframe at {admin_url(admin)} reads the store {url}, whose password it "
            "does not show: pass --store (or set FREEZEFRAME_STORE)"
        )
    return RunningStore(admin_url(admin), Path(str(document.get("data_dir", "."))), url)


def proxy_url(document: dict[str, Any]) -> str:
    """Where the proxy of a ``/health`` document listens, as a client's proxy URL."""
    listen = Address.parse(str(document["proxy"]), "proxy address")
    return f"http://{listen.url_host}:{listen.port}"


def trust_of_running(document: dict[str, Any], admin: Address) -> Trust:
    """The CA of the proxy of a ``/health`` document; it must be on this machine."""
    ca = Path(str(document.get("ca", "")))
    bundle = Path(str(document.get("ca_bundle", "")))
    if not ca.is_file() or not bundle.is_file():
        raise NoProxyFound(
            f"the freezeframe at {admin_url(admin)} keeps its CA at {ca}, which is not on this "
            f"machine; copy it (GET {admin_url(admin)}/ca.pem) and pass --data-dir"
        )
    return Trust(ca, bundle)


def trust_in(data_dir: Path) -> Trust:
    """The CA in ``data_dir`` and its bundle, written from it if absent (never a new CA)."""
    from freezeframe.proxy.trust import CLIENT_BUNDLE, refuse_links, write_bundle

    refuse_links(data_dir)
    ca = data_dir / CA_FILENAME
    if not ca.is_file():
        raise NoProxyFound(
            f"no CA at {ca}; a proxy makes one when it first starts with --data-dir {data_dir}"
        )
    bundle = data_dir / CLIENT_BUNDLE
    if not bundle.is_file():
        write_bundle(bundle, [ca])
    return Trust(ca.absolute(), bundle.absolute())


def client_trust(
    admin: Address, data_dir: Path | None, default_dir: Path, token: str | None = None
) -> Trust:
    """The CA to trust: from ``data_dir`` if given, else from the proxy answering at
    ``admin``, else from ``default_dir`` if a CA is there. Raises NoProxyFound."""
    if data_dir is not None:
        return trust_in(data_dir)
    try:
        return trust_of_running(running(admin, token), admin)
    except (TokenNeeded, NotYourProxy):
        raise
    except NoProxyFound as exc:
        if (default_dir / CA_FILENAME).is_file():
            return trust_in(default_dir)
        raise NoProxyFound(
            f"{exc}; and there is no CA at {default_dir / CA_FILENAME} (pass --data-dir)"
        ) from None


def trust_of_proxy(url: str, admin: str, data_dir: Path | None, token: str | None) -> Trust:
    """``exec --proxy URL``: the CA of the proxy at URL, asked of its admin API; an explicit
    ``data_dir`` wins, for a proxy whose files are mounted somewhere else."""
    from urllib.parse import urlsplit

    if data_dir is not None:
        return trust_in(data_dir)
    address = Address.parse(admin, "admin address")
    document = running(address, token)
    wanted = urlsplit(url if "://" in url else f"http://{url}")
    found = urlsplit(proxy_url(document))
    if (wanted.hostname, wanted.port) != (found.hostname, found.port):
        raise NoProxyFound(
            f"the freezeframe at {admin_url(address)} proxies on {proxy_url(document)}, "
            f"not {url}; pass that proxy's --admin, or --data-dir"
        )
    return trust_of_running(document, address)


def reset_replay(admin: str, token: str | None) -> dict[str, Any]:
    """``replay-reset``: tell the proxy at ``admin`` to start replay from the top; its mode
    and cassette as it answers them. Raises NoProxyFound saying why it could not."""
    import httpx

    url = f"{admin_url(Address.parse(admin, 'admin address'))}/api/replay/reset"
    try:
        answer = httpx.post(url, timeout=10.0, trust_env=False, headers=admin_headers(token))
    except httpx.HTTPError as exc:
        raise NoProxyFound(f"POST {url} failed: {exc}; is freezeframe running there?") from None
    if answer.status_code == 401:
        given = "the one given is wrong" if token else "none was given"
        raise NoProxyFound(
            f"POST {url}: the proxy asks for its admin token and {given}; "
            "set FREEZEFRAME_ADMIN_TOKEN or pass --admin-token"
        )
    try:
        answer.raise_for_status()
        mode: dict[str, Any] = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise NoProxyFound(f"POST {url} failed: {exc}; is freezeframe running there?") from None
    return mode
