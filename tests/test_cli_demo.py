"""``freezeframe demo``: record and replay with no API key, no network and no repository."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from support.proxy import free_port


def freezeframe(*args: str, cwd: Path, admin: int) -> subprocess.CompletedProcess[str]:
    """As a user's shell runs it, off a terminal; FREEZEFRAME_ADMIN points at a port of this
    test's own, so that no other proxy on the machine is asked for its store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**env, "FREEZEFRAME_ADMIN": f"127.0.0.1:{admin}"},
    )


def test_demo_records_replays_with_both_servers_stopped_and_leaves_the_cassette(
    tmp_path: Path,
) -> None:
    admin = free_port()
    done = freezeframe("demo", "--no-browser", cwd=tmp_path, admin=admin)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.count('model calls get_order({"order_id": "ord_8821"})') == 2
    assert out.count("model: Your order ord_8821 has shipped; it arrives Thursday.") == 2
    assert out.index("the model and the tool are stopped") < out.index("replay: freezeframe run")
    assert "replay was identical: yes" in out
    assert f"case file: http://127.0.0.1:{admin}/cassettes/demo" in out
    assert done.stderr == ""
    with socket.socket() as probe:  # the demo's proxies are gone with it
        assert probe.connect_ex(("127.0.0.1", admin)) != 0

    listed = json.loads(freezeframe("ls", "--json", cwd=tmp_path, admin=admin).stdout)
    assert [(row["name"], row["exchanges"]) for row in listed] == [("demo", 3)]
    rows = json.loads(freezeframe("show", "demo", "--json", cwd=tmp_path, admin=admin).stdout)
    assert [(row["method"], row["url"].split("/", 3)[-1], row["status"]) for row in rows] == [
        ("POST", "v1/chat/completions", 200),
        ("GET", "orders/ord_8821", 200),
        ("POST", "v1/chat/completions", 200),
    ]
    answer = json.loads(
        freezeframe("show", "demo", "2", "--json", cwd=tmp_path, admin=admin).stdout
    )
    assert answer["outcome"] == "complete"
    assert "text/event-stream" in json.dumps(answer["response"]["headers"])
    assert freezeframe("verify", "demo", cwd=tmp_path, admin=admin).returncode == 0

    again = freezeframe("demo", "--no-browser", cwd=tmp_path, admin=admin)
    assert again.returncode == 0 and "replay was identical: yes" in again.stdout
    listed = json.loads(freezeframe("ls", "--json", cwd=tmp_path, admin=admin).stdout)
    assert [(row["name"], row["exchanges"]) for row in listed] == [("demo", 3)]  # recorded anew
