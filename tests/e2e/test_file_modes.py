"""The files that hold recorded traffic are created owner-only, like the CA key: the store
a real proxy makes (and its WAL and shared-memory files), and the exports and bundles made
from it; ``FREEZEFRAME_FILE_MODE`` says otherwise when the user wants to share them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess
from support.upstream import Upstream

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most systems give users, which lets SQLite create a store 0644."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def record_and_export(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: Callable[[ProxyProcess], dict[str, str]],
    data_dir: Path,
    out: Path,
    env: dict[str, str],
) -> dict[str, int]:
    """Record one exchange with a real proxy, export it twice; each file's mode."""
    proxy = start_proxy(mode="record", cassette="private", data_dir=data_dir, env=env)
    client_env(proxy)
    with httpx.Client(timeout=30) as client:
        assert client.post(f"{upstream.base_url}/upload", content=b"prompt").status_code == 200
    assert proxy.stored("private", 1)
    store = data_dir / "freezeframe.db"
    found = {name: mode(Path(f"{store}{name}")) for name in ("", "-wal", "-shm")}
    proxy.stop()
    for format_ in ("jsonl", "bundle"):
        target = out / f"private.{format_}"
        done = subprocess.run(
            [sys.executable, "-P", "-m", "freezeframe", "export", "private", "-o", str(target)]
            + ["--format", format_, "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr
        found[format_] = mode(target)
    return found


def test_the_store_its_wal_and_exports_are_created_owner_only(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: Callable[[ProxyProcess], dict[str, str]],
    tmp_path: Path,
) -> None:
    modes = record_and_export(
        start_proxy, upstream, client_env, tmp_path / "data", tmp_path, env={}
    )
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600, "jsonl": 0o600, "bundle": 0o600}


def test_freezeframe_file_mode_shares_them_on_purpose(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    client_env: Callable[[ProxyProcess], dict[str, str]],
    tmp_path: Path,
) -> None:
    modes = record_and_export(
        start_proxy,
        upstream,
        client_env,
        tmp_path / "shared",
        tmp_path,
        env={"FREEZEFRAME_FILE_MODE": "640"},
    )
    assert set(modes.values()) == {0o640}


def test_a_file_mode_that_locks_out_its_owner_is_refused_in_one_line(tmp_path: Path) -> None:
    har = tmp_path / "empty.har"
    har.write_text('{"log": {"entries": []}}')
    done = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", "import", str(har)]
        + ["--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FREEZEFRAME_FILE_MODE": "044"},
    )
    assert done.returncode == 1
    assert not (tmp_path / "data" / "freezeframe.db").exists()
    assert done.stderr.strip() == (
        "freezeframe: error: FREEZEFRAME_FILE_MODE='044': expected an octal file mode that "
        "lets its owner read and write, such as 600 (the default) or 640"
    )
