"""``freezeframe exec``: one process that starts the proxy, runs a command through it, stops.

The way to re-enact a bug on a laptop is ``freezeframe exec --mode replay --cassette
bug-8821 -- python agent.py``: no second terminal, no environment to get wrong, and the
command's exit status is the exit status. The proxy and the command share the proxy's event
loop; the command is a child process with the client environment of ``proxy.wiring``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence

from proxy.discovery import Trust, trust_in
from proxy.serve import StartupError, serve
from proxy.settings import Settings
from proxy.wiring import CLEARED, client_environment

CHILD_STOP_TIMEOUT = 10.0


async def run_command(
    command: Sequence[str],
    *,
    settings: Settings | None = None,
    proxy_url: str | None = None,
    trust: Trust | None = None,
) -> int:
    """Run ``command`` through a new proxy (``settings``), or through the running proxy at
    ``proxy_url`` whose CA is ``trust``."""
    if settings is None:
        assert proxy_url is not None and trust is not None
        return await _child(command, _environment(proxy_url, trust), asyncio.Event())
    ready, stop = asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(serve(settings, ready=ready, stop=stop))
    started = asyncio.create_task(ready.wait())
    await asyncio.wait({server, started}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        started.cancel()
        await server  # raises what kept it from starting
        raise StartupError("the proxy stopped before it was ready")
    url = f"http://{settings.listen.url_host}:{settings.listen.port}"
    try:
        return await _child(command, _environment(url, trust_in(settings.data_dir)), stop)
    finally:
        stop.set()
        await server


def _environment(proxy_url: str, trust: Trust) -> dict[str, str]:
    env = dict(os.environ)
    for name in CLEARED:
        env.pop(name, None)
    env.update(client_environment(proxy_url, trust.ca, trust.bundle))
    return env


async def _child(command: Sequence[str], env: dict[str, str], stop: asyncio.Event) -> int:
    """Run the command; if the proxy is told to stop first, stop the command too."""
    try:
        child = await asyncio.create_subprocess_exec(*command, env=env)
    except OSError as exc:
        raise StartupError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
    exited = asyncio.create_task(child.wait())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not exited.done():
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), CHILD_STOP_TIMEOUT)
        except TimeoutError:
            child.kill()
    code = await exited
    return code if code >= 0 else 128 - code
