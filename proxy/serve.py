"""One process, one event loop: the proxy, the admin API, and an orderly stop.

Stopping is the part that protects data. On SIGTERM or Ctrl-C the listeners close
first, then every exchange still in flight is written as ``incomplete`` (never half a
record), then the store's writer drains to disk. Only then does the process exit.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import secrets
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from freezeframe.addons import AddressBook
from freezeframe.addons.capture import Capture
from freezeframe.addons.record import Record
from freezeframe.addons.state import Journal, Mode, RuntimeState, SharedPositions
from freezeframe.evidence.reading_in import READER
from freezeframe.evidence.words import plural
from freezeframe.proxy.admin import AdminServer, create_app
from freezeframe.proxy.discovery import admin_url
from freezeframe.proxy.keys import redactor_in
from freezeframe.proxy.master import build_master
from freezeframe.proxy.mitmcore import Master
from freezeframe.proxy.mitmcore import proxyserver as mitm_proxyserver
from freezeframe.proxy.notices import empty_cassette
from freezeframe.proxy.retention import keep_sweeping
from freezeframe.proxy.settings import KEY_FILENAME, Address, Settings
from freezeframe.proxy.trust import PlantedLink, client_bundle, refuse_links, upstream_bundle
from freezeframe.storage import CassetteNotFound, Store, WriteStore, open_store
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.perturb import Perturber

log = logging.getLogger("freezeframe")


class StartupError(Exception):
    """A setting or resource that keeps the proxy from starting; the message is one line."""


@dataclass(slots=True)
class Embedded:
    """What ``exec`` shares with the proxy it runs in its own process.

    The namespace's resolver and the proxy must agree on what each address stands for
    (one :class:`AddressBook`); a capture adds a mitmproxy mode; and once the proxy runs,
    its capture addon tells how many requests it saw.
    """

    addresses: AddressBook
    extra_modes: tuple[str, ...] = ()
    capture: Capture | None = None
    journal: Journal | None = None
    """Once the proxy runs: what it did with each request."""


def prepare_data_dir(data_dir: Path) -> None:
    """The data dir exists and takes new files, and none of the files the proxy writes there
    (the CA, the trust bundles, the secret key) is a link someone planted (trust.refuse_links)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / f".write-test-{os.getpid()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        probe.unlink()
    except OSError as exc:
        raise StartupError(f"data dir {str(data_dir)!r} is not writable: {exc.strerror}") from None
    try:
        refuse_links(data_dir, (KEY_FILENAME,))
    except PlantedLink as exc:
        raise StartupError(str(exc)) from None


def _check_ports(settings: Settings) -> None:
    """Name every listening address that is taken, with the flag that moves it, in one line.

    mitmproxy stops at the first address it cannot bind and words it over several lines;
    a user with two busy ports would fix one, start again, and meet the other.
    """
    wanted = [(settings.listen, "--listen")]
    wanted += [
        (Address(settings.listen.host, target.port), f"--reverse {target.name}")
        for target in settings.reverse
    ]
    wanted.append((settings.admin, "--admin"))
    busy = []
    for address, flag in wanted:
        try:
            _bind(address, flag).close()
        except StartupError:
            if address.port:
                busy.append(f"{address} ({flag})")
    if busy:
        raise StartupError(f"address in use: {'; '.join(busy)}; choose other ports")


async def _start_proxy(proxy_master: Master, settings: Settings) -> None:
    server = proxy_master.addons.get("proxyserver")
    assert isinstance(server, mitm_proxyserver.Proxyserver)
    errors: list[str] = []

    class _Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(record.getMessage())

    capture = _Capture(logging.ERROR)
    source = logging.getLogger("mitmproxy.addons.proxyserver")
    source.addHandler(capture)
    source.propagate = False  # its multi-line advice is replaced by our one line
    try:
        if not await server.setup_servers():
            first = next((e.splitlines()[0] for e in errors if e.strip()), "unknown error")
            reason = first.rpartition(": ")[2] or first
            where = re.search(r"listen on (\S+) with", first)
            # Closed here, while its log is still ours: stopping a server that never
            # started logs an empty error line.
            await server.servers.update([])
            if where is None and "tun" in first.lower():  # exec's capture interface
                raise StartupError(f"cannot create the capture interface: {reason}")
            raise StartupError(
                f"cannot listen on {where.group(1) if where else settings.listen}: {reason}"
            )
    finally:
        source.removeHandler(capture)
        source.propagate = True


def _bind(address: Address, what: str) -> socket.socket:
    """Bind before handing the socket to uvicorn, which would ``sys.exit`` on failure."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
        family, kind, proto, _, sockaddr = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError as exc:
        raise StartupError(f"cannot serve the {what} on {address}: {exc.strerror or exc}") from None
    return sock


CLOSE_TIMEOUT_S = 2.0
"""How long a stop waits for the connections it closed to end on their own."""


async def _stop_proxy(proxy_master: Master) -> None:
    """Stop listening, then close every client connection still open (a stream being
    relayed) and let its handler end. Left open, asyncio.run cancelled the handlers, and
    Python 3.12.1's stream callback then printed a CancelledError traceback after the clean
    summary on every Ctrl-C with a stream open."""
    server = proxy_master.addons.get("proxyserver")
    assert isinstance(server, mitm_proxyserver.Proxyserver)
    await server.servers.update([])
    recorder = proxy_master.addons.get("record")
    if isinstance(recorder, Record):
        recorder.stopping()
    for handler in list(server.connections.values()):
        # A client that hung up a moment ago is still listed while its handler winds down,
        # its transport already gone: closing it again raised KeyError and failed the stop.
        if handler.client in handler.transports:
            handler.close_connection(handler.client)
    deadline = time.monotonic() + CLOSE_TIMEOUT_S
    while server.connections and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def serve(
    settings: Settings,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    embedded: Embedded | None = None,
) -> None:
    """Run until SIGTERM/SIGINT, or until ``stop`` is set by a caller embedding the proxy."""
    prepare_data_dir(settings.data_dir)
    _check_ports(settings)
    client_bundle(settings.data_dir)  # creates the CA on first use; clients read both
    try:
        redactor = redactor_in(settings.data_dir, settings.redact_headers, settings.redact_patterns)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    trust = upstream_bundle(settings.data_dir, settings.upstream_ca)
    # Writes run in a process of their own, so they never take the GIL from the event loop.
    store = open_store(
        settings.store_url,
        writer_process=settings.store_writer == "process",
        defer_writer=settings.writer_at_first_write,
        blobs=settings.blobs,
        outbox=settings.outbox,
        reader=READER,  # facts and signals are read there, off the event loop
    )
    try:
        if settings.fresh:
            _empty(store, settings.cassette)
        await _run(
            settings,
            store,
            redactor,
            str(trust),
            ready,
            stop or asyncio.Event(),
            embedded or Embedded(AddressBook()),
        )
    finally:
        store.close()


async def serve_process(settings: Settings) -> None:
    """serve() as a process of its own (``freezeframe run``), whose cyclic garbage collector
    the command turned off before importing the proxy: it is turned back on once the proxy
    serves, with every object the start made frozen (``gc.freeze``), so that no collection
    ever walks them again.

    A start makes about 110,000 tracked objects (modules, classes, the replay table) and
    almost no garbage (some 2,500 objects in cycles, kept for good by the freeze): its 240
    collections, two of them full ones, were 50 to 120 ms of CPU of a replay's start (#30).
    Not for a caller that embeds the proxy (``exec``, a test): freezing would keep whatever
    garbage that process holds at the moment for good.
    """
    ready = asyncio.Event()

    async def collect_once_ready() -> None:
        await ready.wait()
        gc.freeze()
        gc.enable()

    collector = asyncio.create_task(collect_once_ready())
    try:
        await serve(settings, ready=ready)
    finally:
        collector.cancel()
        gc.enable()


def _empty(store: WriteStore, cassette: str) -> None:
    """``--fresh``: the cassette is recorded again from its first exchange."""
    try:
        removed = store.remove(cassette)
    except CassetteNotFound:
        return
    log.info(
        "--fresh: removed %s of cassette %r (%s no other cassette used)",
        plural(removed.exchanges, "exchange"),
        cassette,
        plural(removed.bodies, "body"),
    )


def _perturber(settings: Settings) -> Perturber | None:
    """``--perturb``'s rolls, from ``--seed`` or from a seed drawn now and logged, so that a
    run worth keeping can be run again."""
    if not settings.perturb:
        return None
    seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
    log.info(
        "perturbing replayed answers (%s) with seed %d",
        ", ".join(p.text for p in settings.perturb),
        seed,
    )
    return Perturber(settings.perturb, seed)


async def _run(
    settings: Settings,
    store: Store,
    redactor: Redactor,
    upstream_trust: str,
    ready: asyncio.Event | None,
    stop: asyncio.Event,
    embedded: Embedded,
) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    shared = None
    if settings.replay_session is not None:
        shared = SharedPositions(store, settings.replay_session)
    state = RuntimeState(
        settings.mode,
        settings.cassette,
        settings.replay_pace,
        settings.annotate,
        shared,
        miss_details=settings.miss_details,
    )
    proxy_master = build_master(
        settings,
        store,
        state,
        redactor,
        upstream_trust,
        embedded.addresses,
        embedded.extra_modes,
        _perturber(settings),
    )
    capture = proxy_master.addons.get("capture")
    assert isinstance(capture, Capture)
    embedded.capture = capture
    embedded.journal = state.journal
    admin = AdminServer(
        create_app(store, state, settings), settings.admin, settings.admin_trusted_proxies
    )
    admin_task: asyncio.Task[None] | None = None
    sweeper: asyncio.Task[None] | None = None
    try:
        admin_socket = _bind(settings.admin, "admin API")
        await _start_proxy(proxy_master, settings)
        admin_task = asyncio.create_task(admin.serve(sockets=[admin_socket]))
        if settings.max_age is not None:
            sweeper = asyncio.create_task(keep_sweeping(store, settings.max_age, stop))
        await proxy_master.running()
        log.info(
            "freezeframe %s: proxy on %s, admin on http://%s, cassette %r, store %s, data dir %s",
            state.mode.value,
            settings.listen,
            settings.admin,
            state.cassette,
            store.location,
            settings.data_dir.absolute(),
        )
        log.info("case file: %s/", admin_url(settings.admin))
        if settings.admin_token is not None:
            log.info(
                "the admin port asks for its token: sign in at %s/login", admin_url(settings.admin)
            )
        if state.mode is Mode.REPLAY and (notice := empty_cassette(store, state.cassette)):
            log.warning("%s", notice)
        for target in settings.reverse:
            log.info(
                "reverse %s: http://%s:%d -> %s",
                target.name,
                settings.listen.host,
                target.port,
                target.url,
            )
        if settings.upstream_proxy:
            log.info("forwarding through the upstream proxy %s", settings.upstream_proxy.url)
        if ready is not None:
            ready.set()
        await stop.wait()
        log.info("stopping: closing listeners, writing what is in flight")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await _stop_proxy(proxy_master)
        if sweeper is not None:
            stop.set()
            await sweeper
        if admin_task is not None:
            admin.should_exit = True
            await asyncio.gather(admin_task, return_exceptions=True)
        await proxy_master.done()
    log.info("stopped: %s", state.tally.summary())
