"""The CA and trust files are written only as plain files inside the data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from freezeframe.proxy.trust import CA_FILES, CLIENT_BUNDLE, JAVA_TRUSTSTORE

PLANTED = (*CA_FILES, CLIENT_BUNDLE, JAVA_TRUSTSTORE)


def freezeframe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=clean,
    )


@pytest.mark.parametrize("planted", PLANTED)
def test_a_planted_link_in_the_data_dir_is_refused_and_nothing_outside_is_written(
    tmp_path: Path, planted: str
) -> None:
    """A data dir someone prepared with links in place of the CA files: starting the proxy
    wrote through them (four files outside the data dir overwritten). It refuses in one line
    and the files the links point to are as they were."""
    data_dir, outside = tmp_path / "data", tmp_path / "outside"
    data_dir.mkdir()
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"not yours\n")
    (data_dir / planted).symlink_to(victim)
    dangling = outside / "created-through-a-link"
    if planted != CA_FILES[0]:
        (data_dir / CA_FILES[0]).symlink_to(dangling)

    started = freezeframe(
        "run",
        "--data-dir",
        str(data_dir),
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        cwd=tmp_path,
    )
    assert started.returncode == 1, started.stderr
    assert started.stderr.startswith("freezeframe: error: "), started.stderr
    assert "is a symbolic link" in started.stderr and len(started.stderr.splitlines()) == 1
    assert victim.read_bytes() == b"not yours\n"
    assert not dangling.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
