"""``freezeframe exec``: one process that starts the proxy, runs a command through it, stops.

The way to re-enact a bug on a laptop is ``freezeframe exec --mode replay --cassette
bug-8821 -- python agent.py``: no second terminal, no environment to get wrong, and the
command's exit status is the exit status. The proxy and the command share the proxy's event
loop; the command is a child process with the client environment of ``sandbox.wiring``.

A client that ignores that environment would go around the proxy. So in ``replay`` the
command runs in a network namespace of its own where only the proxy is reachable
(``sandbox.namespace``), and ``--capture transparent`` sends everything it opens through the
proxy whether it asked or not. Where a namespace cannot be made, replay says so in one
line and runs as before; ``--isolate`` makes that an error instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from freezeframe.addons import AddressBook
from freezeframe.addons.mitmproxy_internals import certificates_valid_from
from freezeframe.addons.state import Event, Mode
from freezeframe.proxy.discovery import Trust, trust_in
from freezeframe.proxy.localcapture import local_capture_unavailable_reason
from freezeframe.proxy.notices import nothing_to_replay
from freezeframe.proxy.serve import Embedded, StartupError, serve
from freezeframe.proxy.settings import Settings, open_existing
from freezeframe.proxy.trust import java_truststore
from freezeframe.sandbox import namespace as sandbox
from freezeframe.sandbox.clock import FakedClock, trust_notice
from freezeframe.sandbox.wiring import CLEARED, client_environment
from freezeframe.storage.errors import StoreNotFound

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger("freezeframe")

CHILD_STOP_TIMEOUT = 10.0
CAPTURES = ("transparent", "local")


@dataclass(frozen=True, slots=True)
class Confinement:
    """What ``exec`` was asked to do about clients that ignore the proxy settings.

    ``isolate`` None means the default: isolated in ``replay``, where it can be set up.
    """

    capture: str | None = None
    isolate: bool | None = None


async def run_command(
    command: Sequence[str],
    *,
    settings: Settings | None = None,
    proxy_url: str | None = None,
    trust_of: Callable[[], Trust] | None = None,
    confinement: Confinement = Confinement(),
    clock: FakedClock | None = None,
    journal: list[Event] | None = None,
) -> int:
    """Run ``command`` through a new proxy (``settings``), or through the running proxy at
    ``proxy_url`` whose CA ``trust_of`` finds, once ``confinement`` is known to be possible;
    on ``clock``'s time when given. ``journal`` receives what the new proxy did with each
    request."""
    if settings is not None:
        refuse_nothing_to_replay(settings)
    network = _network(settings, proxy_url, confinement)
    trust = trust_of() if trust_of is not None else None
    if clock is not None and settings is not None:
        certificates_valid_from(clock.start)
    addresses = AddressBook()
    link = f"ff{os.getpid():x}"[:15] if network == "capture" else None
    embedded = Embedded(addresses, (f"tun:{link}",) if link else ())
    stop = asyncio.Event()
    server: asyncio.Task[None] | None = None
    box: sandbox.Sandbox | None = None
    child: asyncio.subprocess.Process | None = None
    try:
        if confinement.capture == "local":  # the redirector needs the pid before it runs
            box = sandbox.Sandbox("none", ("127.0.0.1", 0), addresses)
            env = _environment(_client_url(settings, proxy_url, None), settings, trust, clock)
            child = await box.spawn(command, env)
            embedded.extra_modes = (f"local:{child.pid}",)
        if settings is not None:
            server = await _start(settings, embedded, stop)
        if clock is not None:
            _say_if_untrusted(clock, settings, trust)
        if network is not None:
            box = sandbox.Sandbox(network, _proxy_address(settings, proxy_url), addresses, link)
            env = _environment(_client_url(settings, proxy_url, network), settings, trust, clock)
            if network == "isolate":
                for name in SECRET_VARIABLES:
                    env.pop(name, None)
            child = await _spawn_confined(box, command, env, confinement)
        if child is None:  # no namespace asked for, or (said in one line) none to be had
            if box is not None:
                await box.close()
                box = None
            env = _environment(_client_url(settings, proxy_url, None), settings, trust, clock)
            child = await _spawn(command, env)
        elif box is not None:
            await box.go()
        code = await _wait(child, stop)
    finally:
        if child is not None and child.returncode is None:
            await _stop_child(child)
        if box is not None:
            await box.close()
        stop.set()
        if server is not None:
            await server
    _say_if_nothing_was_recorded(settings, embedded)
    if journal is not None and embedded.journal is not None:
        journal.extend(embedded.journal.after(0))
    return code


def refuse_nothing_to_replay(settings: Settings) -> None:
    """Raise StartupError, before anything runs, for a replay (with no ``--live`` route) of
    a named cassette that holds no recordings in a store that holds others: a typo, or a store
    other than the one recorded into. With no store, or an empty one, nothing was recorded
    anywhere to mistake it for, and a command that calls nothing (a clock check, an isolation
    check) runs as before. The default cassette may be empty on purpose: requests can name
    their own (``X-Freezeframe-Cassette``)."""
    if settings.mode is not Mode.REPLAY or settings.live or settings.cassette == "default":
        return
    try:
        with open_existing(settings.data_dir, settings.store_url, settings.blobs) as store:
            refusal = nothing_to_replay(store, settings.cassette)
    except StoreNotFound:
        return
    if refusal is not None:
        raise StartupError(refusal)


@dataclass(frozen=True, slots=True)
class Run:
    """One run of ``exec --runs``: its seed, its exit status, the answers it had perturbed."""

    number: int
    seed: int
    status: int
    perturbed: tuple[Event, ...]
    record_into: str | None

    def document(self) -> dict[str, Any]:
        """The run as ``exec --runs --json`` prints it."""
        return {
            "run": self.number,
            "seed": self.seed,
            "exit": self.status,
            "record_into": self.record_into,
            "perturbed": [
                {
                    "perturbation": event.perturbed,
                    "request": f"{event.method} {event.url}",
                    "recording": f"{event.cassette}#{event.seq}",
                }
                for event in self.perturbed
            ],
        }


async def run_repeatedly(
    command: Sequence[str],
    settings: Settings,
    runs: int,
    *,
    confinement: Confinement = Confinement(),
    clock: FakedClock | None = None,
) -> list[Run]:
    """``exec --runs N``: the command N times, each through a proxy of its own, run ``i``
    with seed ``S + i`` (``S`` from ``--seed``, or drawn), so that any one of them is run
    again alone with ``--runs 1 --seed S+i``. With ``--record-into NAME``, run ``i`` is
    recorded into ``NAME-<its seed>``, so the variant that failed can be kept."""
    first = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
    done = []
    for number in range(runs):
        seed = first + number
        into = settings.record_into
        if into is not None and runs > 1:
            into = f"{into}-{seed}"
        seeded = dataclasses.replace(settings, seed=seed, record_into=into)
        journal: list[Event] = []
        status = await run_command(
            command, settings=seeded, confinement=confinement, clock=clock, journal=journal
        )
        perturbed = tuple(event for event in journal if event.perturbed is not None)
        done.append(Run(number + 1, seed, status, perturbed, into))
    return done


def _network(settings: Settings | None, proxy_url: str | None, want: Confinement) -> str | None:
    """``capture``, ``isolate`` or None (no namespace), or a one-line error."""
    if want.capture is not None:
        if settings is None:
            raise StartupError(
                f"--capture {want.capture} needs exec to start the proxy, not --proxy"
            )
        if want.isolate:
            raise StartupError(f"--capture {want.capture} and --isolate cannot be combined")
        if want.capture == "local":
            if reason := local_capture_unavailable_reason():
                raise StartupError(f"--capture local does not run here: {reason}")
            return None
        if want.isolate is False:
            raise StartupError(
                "--capture transparent runs the command in a namespace: drop --no-isolate"
            )
        if settings.upstream_proxy is not None:
            raise StartupError("--capture transparent cannot forward through --upstream-proxy")
        if reason := sandbox.capture_unavailable_reason():
            raise StartupError(f"--capture transparent does not run here: {reason}")
        return "capture"
    wanted = want.isolate
    if wanted is None:
        wanted = settings is not None and settings.mode is Mode.REPLAY
    if not wanted:
        return None
    if reason := sandbox.unavailable_reason():
        if want.isolate:
            raise StartupError(f"--isolate: cannot make a network namespace: {reason}")
        _not_isolated(reason)
        return None
    return "isolate"


def _say_if_untrusted(clock: FakedClock, settings: Settings | None, trust: Trust | None) -> None:
    ca = trust.ca if trust is not None else trust_in(settings.data_dir).ca if settings else None
    if ca is not None and (notice := trust_notice(clock.start, ca, settings is not None)):
        log.warning("%s", notice)


def _not_isolated(reason: str) -> None:
    log.warning(
        "replay is not isolated (%s): a client that ignores the proxy can reach the network", reason
    )


async def _spawn_confined(
    box: sandbox.Sandbox, command: Sequence[str], env: dict[str, str], want: Confinement
) -> asyncio.subprocess.Process | None:
    """The command in its namespace; None (after one line) where the default could not be had."""
    try:
        return await box.spawn(command, env)
    except sandbox.Unavailable as exc:
        if want.isolate or want.capture:
            what = "--capture transparent" if want.capture else "--isolate"
            raise StartupError(f"{what}: cannot make a network namespace: {exc}") from None
        _not_isolated(str(exc))
        return None


async def _start(settings: Settings, embedded: Embedded, stop: asyncio.Event) -> asyncio.Task[None]:
    ready = asyncio.Event()
    server = asyncio.create_task(serve(settings, ready=ready, stop=stop, embedded=embedded))
    started = asyncio.create_task(ready.wait())
    await asyncio.wait({server, started}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        started.cancel()
        await server  # raises what kept it from starting
        raise StartupError("the proxy stopped before it was ready")
    return server


def _proxy_address(settings: Settings | None, proxy_url: str | None) -> tuple[str, int]:
    """Where the proxy listens, as the host's side of a namespace connects to it."""
    if settings is not None:
        return settings.listen.url_host.strip("[]"), settings.listen.port
    assert proxy_url is not None
    parts = urlsplit(proxy_url)
    if not parts.hostname:
        raise StartupError(f"--proxy {proxy_url!r}: expected http://host:port")
    return parts.hostname, parts.port or 80


def _client_url(settings: Settings | None, proxy_url: str | None, network: str | None) -> str:
    if network is not None:  # the namespace serves the proxy's port on its own loopback
        return f"http://127.0.0.1:{_proxy_address(settings, proxy_url)[1]}"
    if settings is not None:
        return f"http://{settings.listen.url_host}:{settings.listen.port}"
    assert proxy_url is not None
    return proxy_url


SECRET_VARIABLES = (
    "FREEZEFRAME_ADMIN_TOKEN",
    "FREEZEFRAME_STORE",
    "FREEZEFRAME_UPSTREAM_PROXY",
)
"""freezeframe's own secrets (the admin token; a store or upstream proxy URL may hold a
password): an isolated command reaches only the proxy, and learns none of them."""


def _environment(
    proxy_url: str, settings: Settings | None, trust: Trust | None, clock: FakedClock | None
) -> dict[str, str]:
    """The command's environment: this process's, with the client variables of the proxy
    started for it (whose CA is in its data dir), or of the running proxy whose CA is
    ``trust``, and libfaketime's when the command runs on ``clock``."""
    if trust is None:
        assert settings is not None
        trust = trust_in(settings.data_dir)
    env = dict(os.environ)
    for name in CLEARED:
        env.pop(name, None)
    ours = client_environment(
        proxy_url, trust.ca, trust.bundle, java_truststore(trust.ca, trust.bundle)
    )
    if inherited := env.get("JAVA_TOOL_OPTIONS"):
        ours["JAVA_TOOL_OPTIONS"] = f"{inherited} {ours['JAVA_TOOL_OPTIONS']}"
    if clock is not None:
        ours.update(clock.environment(env.get("LD_PRELOAD")))
    env.update(ours)
    return env


async def _spawn(command: Sequence[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(*command, env=env)
    except OSError as exc:
        raise StartupError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None


async def _wait(child: asyncio.subprocess.Process, stop: asyncio.Event) -> int:
    """Wait for the command; if the proxy is told to stop first, stop the command too."""
    exited = asyncio.create_task(child.wait())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not exited.done():
        await _stop_child(child)
    code = await exited
    return code if code >= 0 else 128 - code


async def _stop_child(child: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(child.wait(), CHILD_STOP_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()


def _say_if_nothing_was_recorded(settings: Settings | None, embedded: Embedded) -> None:
    """A recording run that saw no request at all is almost always a client that ignored
    the proxy settings; say so rather than leave an empty cassette to be found later."""
    if settings is None or embedded.capture is None or embedded.capture.requests:
        return
    if settings.mode in (Mode.RECORD, Mode.AUTO):
        log.warning(
            "the command sent no request through freezeframe, so nothing was recorded; "
            "a client that ignores HTTPS_PROXY is recorded with --capture transparent"
        )


def runs_tables(done: Sequence[Run]) -> tuple[Table, Table]:
    """``exec --runs``: each run's perturbations and exit status, then each perturbation's
    exit statuses."""
    from collections import Counter

    from rich.table import Table

    from freezeframe.evidence.listings import cell

    table = Table("run", "seed", "exit", "perturbed", title="exec --runs", title_justify="left")
    by_kind: dict[str, Counter[int]] = {}
    for run in done:
        lines = [f"{event.perturbed}: {event.method} {event.url}" for event in run.perturbed]
        cells = "\n".join(cell(line) for line in lines)
        table.add_row(str(run.number), str(run.seed), str(run.status), cells)
        kinds = {str(event.perturbed).split()[0] for event in run.perturbed} or {"(none)"}
        for kind in kinds:
            by_kind.setdefault(kind, Counter())[run.status] += 1
    summary = Table("perturbation", "runs", "exit statuses", title="by perturbation")
    for kind, statuses in sorted(by_kind.items()):
        counted = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
        summary.add_row(cell(kind), str(sum(statuses.values())), counted)
    return table, summary
