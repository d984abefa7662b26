"""A JSON body nested 100k levels deep, recorded through a real proxy: every reader of the
store after that (the search index, show, the case file, a bundle's export and import) takes
it as opaque text, never a RecursionError."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e

DEPTH = 100_000
NEEDLE = "deepneedle8821"


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_body_nested_100k_deep_is_opaque_text_to_every_reader(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: Callable[[ProxyProcess], dict[str, str]],
    data_dir: Path,
    tmp_path: Path,
) -> None:
    deep = f'{{"note": "{NEEDLE}", "d": ' + "[" * DEPTH + "]" * DEPTH + "}"
    proxy = start_proxy(mode="record", cassette="deep")
    client_env(proxy)
    with httpx.Client(timeout=60) as client:
        sent = client.post(
            f"{upstream.base_url}/upload",
            content=deep.encode(),
            headers={"content-type": "application/json"},
        )
    assert sent.status_code == 200
    assert proxy.stored("deep", 1)
    proxy.stop()
    assert "RecursionError" not in proxy.log and "Traceback" not in proxy.log, proxy.log

    found = freezeframe(data_dir, "search", NEEDLE)
    assert found.returncode == 0 and "deep" in found.stdout, found.stderr
    shown = freezeframe(data_dir, "show", "deep", "0")
    assert shown.returncode == 0 and NEEDLE in shown.stdout, shown.stderr
    bundle = tmp_path / "deep.ffcase"
    exported = freezeframe(data_dir, "export", "deep", "-o", str(bundle), "--format", "bundle")
    assert exported.returncode == 0, exported.stderr
    imported = freezeframe(data_dir, "import", str(bundle), "--as", "deep-again")
    assert imported.returncode == 0, imported.stderr
    again = freezeframe(data_dir, "show", "deep-again", "0")
    assert again.returncode == 0 and NEEDLE in again.stdout, again.stderr
    for result in (found, shown, exported, imported, again):
        assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr

    viewer = start_proxy(mode="replay", cassette="deep")
    page = viewer.admin("GET", "/cassettes/deep/0", headers={"accept": "text/html"})
    assert page.status_code == 200 and NEEDLE in page.text
    twin = viewer.admin("GET", "/cassettes/deep/0.json")
    assert twin.status_code == 200 and NEEDLE in twin.text
    viewer.stop()
    assert "Traceback" not in viewer.log, viewer.log
