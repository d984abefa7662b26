"""``exec --clock``: the command sees the recording's time, the proxy keeps the true one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mitmproxy import certs
from mitmproxy.options import CONF_BASENAME
from support.exchanges import plausible_exchange
from support.proxy import free_port
from support.upstream import Upstream

from freezeframe.addons.mitmproxy_internals import certificates_valid_from
from freezeframe.proxy.settings import default_store_url
from freezeframe.sandbox.clock import library
from freezeframe.storage import open_store


def _libfaketime_missing() -> bool:
    try:
        library()
    except ValueError:
        return True
    return False


#: CI sets this, so that the clock's tests never pass by skipping where CI installed none.
REQUIRE_FAKETIME = os.environ.get("FREEZEFRAME_REQUIRE_FAKETIME") == "1"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        _libfaketime_missing() and not REQUIRE_FAKETIME,
        reason="libfaketime is not installed (apt-get install libfaketime, as .ci/run does)",
    ),
]

LEAP_NIGHT = datetime(2024, 2, 29, 23, 59, 58, tzinfo=UTC)
SHOW_TIME = "date -u '+%Y-%m-%d %H:%M'; sleep 2.2; date -u '+%Y-%m-%d %H:%M'; " + (
    f"{sys.executable} -c 'import datetime; "
    'print(datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"))\''
)
AGENT = textwrap.dedent(
    """
    import datetime, sys, httpx
    print(datetime.datetime.now(datetime.UTC).date(), flush=True)
    print(httpx.get(sys.argv[1] + "/tool/counter", timeout=10).json()["count"], flush=True)
    """
)


def freezeframe_exec(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "exec",
            "--data-dir",
            str(data_dir),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--admin",
            f"127.0.0.1:{free_port()}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=Path(__file__).parents[2],
    )


def test_a_shell_and_python_command_see_the_given_time_and_it_advances(tmp_path: Path) -> None:
    """Replay (isolated in its namespace where the system allows) at a leap-day midnight."""
    ran = freezeframe_exec(
        tmp_path / "data",
        "--mode",
        "replay",
        "--clock",
        "2024-02-29T23:59:58Z",
        "--",
        "sh",
        "-c",
        SHOW_TIME,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["2024-02-29 23:59", "2024-03-01 00:00", "2024-03-01 00:00"]


def test_the_recorded_clock_starts_at_the_cassettes_first_request(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with open_store(default_store_url(data_dir)) as store:
        for n in range(2):  # the second a day later: the first request's time is the start
            slot = store.reserve("bug-8821", f"k{n}")
            recorded_at = LEAP_NIGHT.timestamp() + 86400 * n
            store.submit(plausible_exchange(slot, cassette="bug-8821", started_at=recorded_at))
        store.flush()

    ran = freezeframe_exec(
        data_dir, "--mode", "replay", "--cassette", "bug-8821", "--clock", "recorded", "--",
        "sh", "-c", SHOW_TIME,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["2024-02-29 23:59", "2024-03-01 00:00", "2024-03-01 00:00"]


def test_an_https_client_trusts_the_proxy_on_a_clock_set_back(
    tmp_path: Path, upstream: Upstream, upstream_ca_file: Path
) -> None:
    """The proxy makes certificates valid at the command's time, not at its own; its CA
    (made here in 2024, as a data dir in use since then would hold) covers both."""
    data_dir = tmp_path / "data"
    certificates_valid_from(datetime(2024, 1, 1, tzinfo=UTC))
    try:
        certs.CertStore.create_store(data_dir, CONF_BASENAME, 2048)
    finally:
        certificates_valid_from(None)
    common = ("--upstream-ca", str(upstream_ca_file), "--cassette", "leap")
    agent = ("--", sys.executable, "-c", AGENT, upstream.base_url)
    recorded = freezeframe_exec(data_dir, "--mode", "record", *common, *agent)
    assert recorded.returncode == 0, recorded.stderr

    replayed = freezeframe_exec(
        data_dir, "--mode", "replay", *common, "--clock", "2024-02-29T23:59:58Z", *agent
    )

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.split() == ["2024-02-29", "1"]
    assert upstream.connections == 1, "only the recording reached the upstream"


def test_the_clock_is_refused_in_one_line_when_it_cannot_be_set(tmp_path: Path) -> None:
    empty = freezeframe_exec(tmp_path / "data", "--clock", "recorded", "--", "true")
    assert empty.returncode == 1
    assert empty.stderr.strip().splitlines()[-1].startswith("freezeframe: error: ")

    bad = freezeframe_exec(tmp_path / "data", "--clock", "yesterday", "--", "true")
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "freezeframe: error: --clock 'yesterday': expected recorded, or an ISO 8601 time "
        "such as 2024-02-29T23:59:30Z"
    )
