"""freezeframe's mitmproxy addons, as one ordered chain.

Order matters and is the whole design: a captured request is named as a proxied one
would be, then the context addon strips freezeframe's headers
and picks the cassette before anyone looks at the request; replay answers what it can;
record sees only what replay left for the upstream.

Importing this package loads no addon (and so no mitmproxy): the command line reads
``addons.state`` through it and must answer at once. The names below are loaded when
first asked for.
"""

from __future__ import annotations

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freezeframe.addons.capture import AddressBook
    from freezeframe.addons.routing import Routing
    from freezeframe.addons.state import Mode, RuntimeState
    from freezeframe.canonicalize import KeyConfig
    from freezeframe.storage import Store
    from freezeframe.storage.redaction import Redactor
    from freezeframe.whatif.perturb import Perturber

__all__ = ["AddressBook", "Mode", "Routing", "RuntimeState", "default_addons"]

_LAZY = {
    "AddressBook": "freezeframe.addons.capture",
    "Routing": "freezeframe.addons.routing",
    "Mode": "freezeframe.addons.state",
    "RuntimeState": "freezeframe.addons.state",
}


def __getattr__(name: str) -> Any:
    """The re-exported names, imported on first use (PEP 562)."""
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_addons(
    store: Store,
    state: RuntimeState,
    redactor: Redactor,
    key_config: KeyConfig,
    *,
    addresses: AddressBook,
    routing: Routing,
    admin: str,
    strict: bool = False,
    perturber: Perturber | None = None,
) -> list[object]:
    """``admin`` is the admin API's ``host:port``, which freezeframe's answers name;
    ``strict``: an answer being recorded ends only once it is committed; ``perturber``
    changes replayed answers (``--perturb``)."""
    from freezeframe.addons.alpn import PreferHttp2
    from freezeframe.addons.capture import Capture
    from freezeframe.addons.context import RequestContext
    from freezeframe.addons.live_ids import LiveIds
    from freezeframe.addons.record import Record
    from freezeframe.addons.reenact import Reenactor
    from freezeframe.addons.replay import Replay
    from freezeframe.addons.upstream_errors import UpstreamErrors

    reenactor = Reenactor(store, redactor)
    return [
        Capture(state, addresses),  # first: a captured request gets its name before anyone looks
        PreferHttp2(),
        UpstreamErrors(),
        RequestContext(state, redactor, routing),
        reenactor,
        Replay(store, state, key_config, redactor, reenactor, admin, perturber),
        Record(store, state, key_config, redactor, strict=strict),
        LiveIds(store, state, key_config, redactor),  # after record: it wraps record's tee
    ]
