"""``--max-age``: cassettes nobody has recorded into for that long are removed.

Recording every production run is only affordable if old runs go away on their own. A
cassette whose last exchange is older than the limit is removed whole (storage's
``remove``: its exchanges, notes, misses, search entries, and the bodies no other cassette
uses), at start and then every hour, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from freezeframe.storage import CassetteNotFound, Removed, StoreError, WriteStore

log = logging.getLogger("freezeframe")

SWEEP_EVERY_S = 3600.0


def sweep(store: WriteStore, max_age: float, now: float | None = None) -> list[Removed]:
    """Remove every cassette whose last exchange started more than ``max_age`` seconds ago."""
    limit = (now if now is not None else time.time()) - max_age
    removed = []
    for summary in store.cassettes():
        if summary.last_at is None or summary.last_at >= limit:
            continue
        try:
            gone = store.remove(summary.name)
        except CassetteNotFound:
            continue  # removed by someone else meanwhile
        log.info(
            "--max-age: removed cassette %r (%d exchanges, last %.0f days ago; %d bodies freed)",
            gone.cassette,
            gone.exchanges,
            (time.time() - summary.last_at) / 86400,
            gone.bodies,
        )
        removed.append(gone)
    return removed


async def keep_sweeping(store: WriteStore, max_age: float, stop: asyncio.Event) -> None:
    """Sweep now and every SWEEP_EVERY_S until ``stop``; a store that fails is logged and
    tried again next time."""
    while not stop.is_set():
        try:
            await asyncio.to_thread(sweep, store, max_age)
        except StoreError as exc:
            log.error("--max-age: cannot remove old cassettes: %s", exc)
        try:
            await asyncio.wait_for(stop.wait(), SWEEP_EVERY_S)
        except TimeoutError:
            continue
