"""A proxy started with --max-age removes the cassettes nobody recorded into for that long."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.exchanges import plausible_exchange
from support.proxy import ProxyProcess

from freezeframe.storage import open_store

pytestmark = pytest.mark.e2e


def test_the_proxy_ages_out_old_cassettes_at_start(
    start_proxy: Callable[..., ProxyProcess], data_dir: Path
) -> None:
    url = f"sqlite:///{data_dir / 'freezeframe.db'}"
    with open_store(url) as store:
        for name, age_days in (("last-quarter", 95), ("yesterday", 1)):
            slot = store.reserve(name, "k")
            started = time.time() - age_days * 86400
            store.submit(plausible_exchange(slot, cassette=name, started_at=started))
    proxy = start_proxy(mode="record", args=("--max-age", "30d"))
    deadline = time.monotonic() + 20
    while "--max-age: removed cassette 'last-quarter'" not in proxy.log:
        assert time.monotonic() < deadline, proxy.log
        time.sleep(0.05)
    assert proxy.stop() == 0
    with open_store(url) as store:
        assert store.cassette_names() == ["yesterday"]
