"""The admin API in-process (starlette's ``httpx.ASGITransport``), with a real store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.settings import Settings, default_store_url
from freezeframe.storage import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(default_store_url(tmp_path)) as opened:
        yield opened


@pytest.mark.asyncio
async def test_events_say_what_was_done_with_each_request_since_a_number(
    store: Store, tmp_path: Path
) -> None:
    state = RuntimeState(Mode.REPLAY, "bug-8821")
    state.journal.add("hit", "bug-8821", 0, "POST", "https://api.openai.com/v1/chat", status=200)
    state.journal.add("miss", "bug-8821", None, "GET", "https://tools.local/x", message="no")
    app = create_app(store, state, Settings(data_dir=tmp_path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8081") as client:
        everything = (await client.get("/api/events")).json()
        since_first = (await client.get("/api/events?after=1")).json()
        bad = await client.get("/api/events?after=first")

    assert everything["last"] == 2
    assert [(e["n"], e["kind"], e["seq"]) for e in everything["events"]] == [
        (1, "hit", 0),
        (2, "miss", None),
    ]
    assert since_first["events"] == [everything["events"][1]]
    assert since_first["events"][0]["message"] == "no"
    assert bad.status_code == 400
