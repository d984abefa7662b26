"""A proxy starts without what only its admin pages, its metrics or a tool-call check use (#30).

Every agent run and every test starts a proxy, and most never open a case-file page, scrape
``/metrics`` or record a tool call with a schema: jinja2, prometheus_client, jsonschema and a
WebSocket library were a tenth of the CPU of a replay's start. The check runs in a fresh
interpreter (what a module imports shows only there): a replay proxy is started on a real
store and real ports, ``/health`` is asked, then a case-file page and ``/metrics``, which
load what they need when first asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.proxy import free_port

ROOT = Path(__file__).resolve().parents[2]

LATER = ("jinja2", "prometheus_client", "jsonschema", "websockets")
"""Imported for a page, a scrape or a tool schema, never for a start."""

_START = """
import asyncio, json, sys
from pathlib import Path

import httpx

from freezeframe.addons.state import Mode
from freezeframe.proxy import serve
from freezeframe.proxy.settings import Address, Settings

later = json.loads(sys.argv[2])
admin = Address("127.0.0.1", int(sys.argv[4]))
settings = Settings(
    mode=Mode.REPLAY,
    data_dir=Path(sys.argv[1]),
    listen=Address("127.0.0.1", int(sys.argv[3])),
    admin=admin,
)
seen = {}


def loaded():
    return [name for name in later if name in sys.modules]


async def main():
    ready, stop = asyncio.Event(), asyncio.Event()

    async def visit():
        await ready.wait()
        seen["ready"] = loaded()
        async with httpx.AsyncClient(base_url=f"http://{admin}", trust_env=False) as client:
            seen["health"] = (await client.get("/health")).status_code
            seen["after /health"] = loaded()
            seen["page"] = (await client.get("/cassettes")).status_code
            seen["metrics"] = (await client.get("/metrics")).status_code
        seen["after pages"] = loaded()
        stop.set()

    visitor = asyncio.create_task(visit())
    await serve.serve(settings, ready=ready, stop=stop)
    await visitor


asyncio.run(main())
print(json.dumps(seen))
"""


def test_a_replay_start_loads_the_admin_pages_and_metrics_only_when_asked(
    tmp_path: Path,
) -> None:
    ran = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            _START,
            str(tmp_path / "data"),
            json.dumps(LATER),
            str(free_port()),
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen["ready"] == [] and seen["after /health"] == [], seen
    assert (seen["health"], seen["page"], seen["metrics"]) == (200, 200, 200)
    assert {"jinja2", "prometheus_client"} <= set(seen["after pages"])
