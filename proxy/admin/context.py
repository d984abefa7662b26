"""What every handler of the admin port reads: the store, the runtime state, the settings and
the parts made from them once, kept on the app's state by ``create_app``.

The handlers are module-level functions of ``request`` (starlette's plain form), each
taking what it needs from :meth:`AdminContext.of`, so a route reads on its own, without the
factory around it that once held every handler as a closure over these parts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

if TYPE_CHECKING:
    from freezeframe.addons.state import RuntimeState
    from freezeframe.canonicalize import KeyConfig
    from freezeframe.proxy.admin.access import LoginAttempts, Sessions
    from freezeframe.proxy.admin.casefile import Pages
    from freezeframe.proxy.metrics import Metrics
    from freezeframe.proxy.settings import Settings
    from freezeframe.storage import Store


@dataclass(eq=False)
class AdminContext:
    store: Store
    runtime: RuntimeState
    """The proxy's mode, cassette, pace, tally and journal (``addons.state``)."""
    settings: Settings
    hosts: frozenset[str]
    """The names a request's ``Host`` may carry (``guard.allowed_hosts``)."""
    config: KeyConfig
    """The key configuration an edit re-keys with and the exchange page shows stripped."""
    pages: Pages
    sessions: Sessions
    attempts: LoginAttempts
    """Wrong tokens, from the form and bearer headers alike, counted together."""
    about: dict[str, Any]
    """Where things are (addresses, data dir, CA, store) and the version: ``/health``."""

    @classmethod
    def of(cls, request: Request) -> AdminContext:
        found = request.app.state.admin
        assert isinstance(found, cls), "create_app sets app.state.admin"
        return found

    @functools.cached_property
    def metrics(self) -> Metrics:
        """The registry, made at the first scrape: prometheus_client is 10 ms of CPU at
        every start otherwise, and a scrape reads the counts kept anyway (#30)."""
        from freezeframe.proxy.metrics import Metrics

        return Metrics(self.runtime.tally, self.store)
