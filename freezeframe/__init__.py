"""freezeframe: record the exact bytes an AI agent exchanges over HTTP(S), replay them later.

This is the distribution's one import name. A source checkout keeps its packages at the top
(``proxy/``, ``addons/``, ``canonicalize/``, ``storage/``, ``evidence/``,
``exchange_formats/``, ``cli.py``, ...) and this folder holds only the distribution's own
modules; the wheel carries the packages inside ``freezeframe/`` (``package-dir`` in
pyproject.toml, setup.py for ``cli.py``), so no module of a user's project (a ``cli.py``, a
``storage`` package) can stand in for one of ours. In a checkout the folders are not beside
this file, so the package also looks in the checkout's top folder: ``freezeframe.storage``
is ``storage/`` itself, with its real path in every traceback, and a new module is seen at
once. That holds wherever this file was found: the checkout on the path, or the strict
editable install's tree of links in ``build/``, which mypy and lint-imports read (they do
not run this file). Each top-level package refuses its bare name (``import storage``), so a
module is never loaded twice under two names. Importing this package loads nothing else:
the command line and the pytest plugin import what they use.
"""

from __future__ import annotations

import os

__all__ = ["__version__"]

_HERE = os.path.dirname(os.path.realpath(__file__))
if not os.path.isdir(os.path.join(_HERE, "storage")):
    __path__[:] = [_HERE, os.path.dirname(_HERE)]


def __getattr__(name: str) -> str:
    """``__version__`` comes from the installed package's metadata: one source of truth,
    read when asked for, not at every import."""
    if name == "__version__":
        from importlib.metadata import version

        return version("freezeframe")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
