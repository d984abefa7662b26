"""The README's "Five minutes with your own agent", pasted into bash as one block.

A newcomer copies the blocks one after the other into a shell, with their own agent as
``agent.py``. Pasted at once, ``eval "$(freezeframe env)"`` used to run before the
backgrounded proxy answered: nothing was set and the agent went straight upstream,
unrecorded. Here the blocks run exactly as the README prints them; only the ports (through
``FREEZEFRAME_LISTEN`` / ``FREEZEFRAME_ADMIN``, so that parallel tests never share 8080) and
the upstream's test CA are set around them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from support.order_world import AGENT, TOOLS, ModelServer, OrderService
from support.proxy import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
WRONG = "Your order ord_7001 (standing desk) is processing."


def five_minutes() -> str:
    """The shell blocks of the README's five minutes, in order, as one paste."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Five minutes with your own agent", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S))


@pytest.fixture
def world(upstream_ca: trustme.CA) -> Iterator[tuple[ModelServer, OrderService]]:
    model, orders = ModelServer(upstream_ca).start(), OrderService(upstream_ca).start()
    try:
        yield model, orders
    finally:
        model.stop()
        orders.stop()


def test_the_readme_five_minutes_pasted_as_one_block(
    tmp_path: Path, world: tuple[ModelServer, OrderService], upstream_ca_file: Path
) -> None:
    model, orders = world
    (tmp_path / "agent.py").write_text(
        "import sys\n"
        f"sys.argv[1:] = {[model.base_url, orders.base_url, 'u-1', json.dumps(TOOLS)]!r}\n"
        f"exec({AGENT!r})\n"
    )
    (tmp_path / "rate-limited.json").write_text(
        json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit"}})
    )
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env = {k: v for k, v in env.items() if not k.startswith("FREEZEFRAME_")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "FREEZEFRAME_LISTEN": f"127.0.0.1:{free_port()}",
        "FREEZEFRAME_ADMIN": f"127.0.0.1:{free_port()}",
        "FREEZEFRAME_UPSTREAM_CA": str(upstream_ca_file),
    }
    shell = subprocess.Popen(
        ["bash", "-c", five_minutes()],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = shell.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a proxy left behind by a failed step
            os.killpg(shell.pid, signal.SIGKILL)
    said = out.splitlines()
    assert said.count(WRONG) == 2, f"recorded, then replayed\nstdout:\n{out}\nstderr:\n{err}"
    assert (len(model.requests), len(orders.requests)) == (2, 1), "only the recording went out"
    assert any(line.startswith("│ first-run ") for line in said), "ls lists the cassette"
    assert "first-run and first-run-429-rerun diverge at step 2" in out, out
    assert "no freezeframe answers" not in err
