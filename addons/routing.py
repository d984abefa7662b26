"""Which requests of a replay go upstream for real, and where the new run is recorded.

A what-if keeps some of the world frozen and lets some of it run: ``--live api.openai.com``
sends the model calls upstream while every tool is answered from the cassette, and
``--record-into NAME`` keeps the new run (the live answers and, marked as replayed from their
source, the frozen ones) as a cassette of its own. ``[[route]]`` tables in the rules file say
the same per host and path, with any mode. ``--after-miss live`` replays the live routes too,
until the run takes a path the recording does not have (its first miss); from then on they go
upstream. Nothing goes upstream that no route names: a miss elsewhere is still a miss.

Outside ``replay`` mode, routes change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from freezeframe.addons.state import Mode
from freezeframe.canonicalize import Route


@dataclass(frozen=True, slots=True)
class Routing:
    live: tuple[Route, ...] = ()
    """``--live`` routes, matched first."""
    routes: tuple[Route, ...] = ()
    """The rules file's ``[[route]]`` tables, in file order."""
    record_into: str | None = None
    after_miss_live: bool = False
    live_upstream: tuple[str, str, int] | None = None
    """Where ``--live`` routes go instead of the host the client asked for (scheme, host,
    port): ``recheck --live --model-url`` sends a run's model calls to another model."""

    def decide(self, mode: Mode, host: str, port: int, path: str, diverged: bool) -> Decision:
        """What a request to ``host``, ``port`` and ``path`` gets, the proxy being in
        ``mode`` and its run having missed (``diverged``) or not."""
        if mode is not Mode.REPLAY:
            return Decision(mode, None)
        host = host.lower()
        if any(route.applies_to(host, path, port) for route in self.live):
            forward = self._forward()
            if self.after_miss_live and not diverged:
                return Decision(Mode.REPLAY, self.record_into, on_miss=forward)
            return forward
        route = next((r for r in self.routes if r.applies_to(host, path, port)), None)
        if route is None or route.mode == "replay":
            return Decision(Mode.REPLAY, self.record_into)
        return Decision(Mode(route.mode), self.record_into)

    def _forward(self) -> Decision:
        """A live route's request: forwarded, and recorded where the new run goes; not
        stored without one."""
        if self.record_into is None:
            return Decision(Mode.PASSTHROUGH, None, upstream=self.live_upstream)
        return Decision(Mode.RECORD, self.record_into, upstream=self.live_upstream)


@dataclass(frozen=True, slots=True)
class Decision:
    mode: Mode
    """How the request is handled."""
    record_into: str | None
    """Where it is recorded when forwarded, or where a replayed answer is copied to; None:
    forwarded requests go to the request's own cassette, and replayed ones are not copied."""
    on_miss: Decision | None = None
    """A live route under ``--after-miss live``: replayed while the run follows the
    recording; at its first miss the run is marked as diverged and the request gets this
    decision (forwarded) instead of a miss."""
    upstream: tuple[str, str, int] | None = None
    """Forwarded there (scheme, host, port) instead of to the host asked for."""
