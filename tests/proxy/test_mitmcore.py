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


def _fresh(code: str, *args: str) -> object:
    """What ``code`` (which prints one JSON document last) prints in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_the_cli_and_the_proxy_import_no_default_addon() -> None:
    loaded = _fresh(
        "import json, sys, freezeframe.cli, freezeframe.proxy.serve, freezeframe.proxy.master\n"
        f"print(json.dumps([m for m in {list(DEFAULT_ADDON_ONLY)!r} if m in sys.modules]))"
    )
    assert loaded == []


def test_a_sqlite_store_imports_no_postgresql_dialect(tmp_path: Path) -> None:
    loaded = _fresh(
        "import json, sys\n"
        "from freezeframe.storage import open_store\n"
        f"open_store('sqlite:///{tmp_path}/freezeframe.db').close()\n"
        "print(json.dumps('sqlalchemy.dialects.postgresql' in sys.modules))"
    )
    assert loaded is False


def test_mitmproxy_default_addons_still_load_on_first_use() -> None:
    names = _fresh(
        "import json, freezeframe.proxy.mitmcore\n"
        "from mitmproxy import addons\n"
        "from mitmproxy.addons import onboarding\n"
        "print(json.dumps([type(a).__name__ for a in addons.default_addons()]))"
    )
    assert isinstance(names, list)
    assert {"Core", "Onboarding", "Proxyserver", "TlsConfig"} <= set(names)


_COUNT_CA_LOADS = """
import asyncio, json, sys
from pathlib import Path
from mitmproxy import certs
from freezeframe.addons.state import Mode
from freezeframe.proxy import serve
from freezeframe.proxy.settings import Address, Settings

loads = []
load = certs.CertStore.from_store.__func__


def counted(cls, path, *args, **kwargs):
    loads.append(str(path))
    return load(cls, path, *args, **kwargs)


certs.CertStore.from_store = classmethod(counted)
anywhere = Address("127.0.0.1", 0)
settings = Settings(mode=Mode.REPLAY, data_dir=Path(sys.argv[1]), listen=anywhere, admin=anywhere)


async def main():
    ready, stop = asyncio.Event(), asyncio.Event()

    async def until_ready():
        await ready.wait()
        stop.set()

    watcher = asyncio.create_task(until_ready())
    await serve.serve(settings, ready=ready, stop=stop)
    await watcher


asyncio.run(main())
print(json.dumps(loads))
"""


def test_a_start_loads_the_ca_once(tmp_path: Path) -> None:
    """Loading the CA checks its RSA key, tens of milliseconds each time: it is made on first
    use in a directory of its own and renamed into the data dir without being read back
    (proxy.trust.ensure_ca), and loaded only by mitmproxy's TLS addon when the proxy starts
    running, the first time as every other."""
    data_dir = tmp_path / "data"
    first = _fresh(_COUNT_CA_LOADS, str(data_dir))
    again = _fresh(_COUNT_CA_LOADS, str(data_dir))
    assert (first, again) == ([str(data_dir)], [str(data_dir)])
