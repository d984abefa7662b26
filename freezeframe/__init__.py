"""freezeframe: record the exact bytes an AI agent exchanges over HTTP(S), replay them later.

This is the distribution's one import name. A source checkout keeps its packages at the top
(``proxy/``, ``addons/``, ``canonicalize/``, ``storage/``, ``evidence/``,
``exchange_formats/``, ``cli.py``); this folder links them in, so the checkout imports as the
wheel does and no module of a user's project (a ``cli.py``, a ``storage`` package) can stand
in for one of ours. Importing it loads nothing else: the command line and the pytest plugin
import what they use.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__`` comes from the installed package's metadata: one source of truth,
    read when asked for, not at every import."""
    if name == "__version__":
        from importlib.metadata import version

        return version("freezeframe")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
