"""Start-up imports mitmproxy's proxy core, not its default addon set (#14).

Each check runs in a fresh interpreter: what a module imports is only visible before anything
else in the process has imported it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DEFAULT_ADDON_ONLY = (
    "flask",
    "werkzeug",
    "ldap3",
    "mitmproxy.addons.onboarding",
    "mitmproxy.addons.proxyauth",
    "mitmproxy.addons.save",
    "mitmproxy.addons.script",
)
"""What only mitmproxy's default addons import: a tenth of a second or more of start-up."""


def _fresh(code: str) -> object:
    """What ``code`` (which prints one JSON document) prints in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout)


def test_the_cli_and_the_proxy_import_no_default_addon() -> None:
    loaded = _fresh(
        "import json, sys, cli, proxy.serve, proxy.master\n"
        f"print(json.dumps([m for m in {list(DEFAULT_ADDON_ONLY)!r} if m in sys.modules]))"
    )
    assert loaded == []


def test_a_sqlite_store_imports_no_postgresql_dialect(tmp_path: Path) -> None:
    loaded = _fresh(
        "import json, sys\n"
        "from storage import open_store\n"
        f"open_store('sqlite:///{tmp_path}/freezeframe.db').close()\n"
        "print(json.dumps('sqlalchemy.dialects.postgresql' in sys.modules))"
    )
    assert loaded is False


def test_mitmproxy_default_addons_still_load_on_first_use() -> None:
    names = _fresh(
        "import json, proxy.mitmcore\n"
        "from mitmproxy import addons\n"
        "from mitmproxy.addons import onboarding\n"
        "print(json.dumps([type(a).__name__ for a in addons.default_addons()]))"
    )
    assert isinstance(names, list)
    assert {"Core", "Onboarding", "Proxyserver", "TlsConfig"} <= set(names)
