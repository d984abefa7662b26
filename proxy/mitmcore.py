"""mitmproxy's proxy core, imported without its default addon set.

``mitmproxy/addons/__init__.py`` imports every one of mitmproxy's thirty-odd addons so that
``default_addons()`` can list them, and Python runs a package's ``__init__`` before any of
its modules: importing ``mitmproxy.master`` (which imports ``mitmproxy.addons.termlog``) or
``mitmproxy.addons.proxyserver`` therefore pulls in flask and werkzeug (onboarding), ldap3
and pyasn1 (proxyauth), the flow filters and more. freezeframe uses four of those addons
(proxy.master), and the rest cost about 0.3 s of CPU at every start on a busy 2-core machine,
a fifth of what ``freezeframe run`` used by the time ``/health`` answered
(tests/benchmarks/bench_startup.py; tests/proxy/test_mitmcore.py keeps them out).

So, before anything imports the package, it is registered without running its ``__init__``:
its modules import as usual, and the first use of anything else it defines (such as
``default_addons``, which mitmdump or a test may still call in the same process) runs the
real ``__init__`` then. When the package was imported before this module, nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

_PACKAGE = "mitmproxy.addons"


def _defer_default_addons() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> object:
        if importlib.util.find_spec(f"{_PACKAGE}.{name}") is not None:
            return importlib.import_module(f"{_PACKAGE}.{name}")
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[_PACKAGE] = package


_defer_default_addons()

# Imported only now, so that they find the package registered above.
from mitmproxy.addons import next_layer, proxyserver, tlsconfig, upstream_auth  # noqa: E402
from mitmproxy.master import Master  # noqa: E402

__all__ = ["Master", "next_layer", "proxyserver", "tlsconfig", "upstream_auth"]
