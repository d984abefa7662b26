"""No read the proxy or the case file makes scans every exchange of the store.

Replay start, a lookup, a run's listing and ``ls`` must cost the same in a store of a million
exchanges as in one of a thousand (#14). Timing them here would prove nothing and fail on a busy
machine, so each statement a read runs is asked for SQLite's plan instead (EXPLAIN QUERY PLAN),
and a full scan of a table that grows with the store fails the test, naming the statement.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool
from support.exchanges import plausible_exchange

from storage import ExchangeFilter, Miss, Store, open_store

GROWING = ("exchanges", "blobs", "blob_parts", "drifts", "texts", "text_uses", "misses")
"""The tables that grow with what is recorded; cassettes and their totals grow with runs."""

_SCAN = re.compile(r"^SCAN (\w+)")


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Store, Path, list[str]]]:
    """A SQLite store with two cassettes, and the statements its connections run from now."""
    statements: list[str] = []

    def trace(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    database = tmp_path / "freezeframe.db"
    with open_store(f"sqlite:///{database}") as store:
        for cassette in ("alpha", "beta"):
            for n in range(3):
                key = f"{cassette}-{n % 2}"
                store.submit(
                    plausible_exchange(
                        store.reserve(cassette, key),
                        cassette=cassette,
                        key=key,
                        request_body=f"{cassette} {n}".encode(),
                        context={"run-id": cassette},
                    )
                )
        store.flush(30)
    event.listen(Pool, "connect", trace)
    try:
        with open_store(f"sqlite:///{database}", create=False) as store:
            yield store, database, statements
    finally:
        event.remove(Pool, "connect", trace)


READS: dict[str, Callable[[Store], object]] = {
    "open": lambda store: open_store(store.location, create=False).close(),
    "lookup": lambda store: store.lookup("alpha", "alpha-1", 0),
    "count": lambda store: store.count("alpha", "alpha-0"),
    "has_cassette": lambda store: store.has_cassette("alpha"),
    "cassette_names": lambda store: store.cassette_names(),
    "ls": lambda store: store.cassettes(),
    "ls again": lambda store: (store.cassettes(), store.cassettes()),
    "run listing": lambda store: store.exchanges("alpha"),
    "run listing, a page": lambda store: store.exchanges("alpha", offset=1, limit=1),
    "run listing, filtered": lambda store: store.exchanges("alpha", ExchangeFilter(status=200)),
    "run overview": lambda store: store.overview("alpha"),
    "one exchange": lambda store: store.exchange("alpha", 1),
    "misses": lambda store: store.misses("alpha"),
}


SCANNING: dict[str, Callable[[Store], object]] = {
    "ls of a run": lambda store: store.cassettes(ExchangeFilter(run_id="alpha")),
}
"""Reads known to scan: ``exchanges.run_id`` has no index, and adding one is a schema step."""


@pytest.mark.parametrize(
    "read",
    [
        *READS,
        *(
            pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="no run_id index"))
            for name in SCANNING
        ),
    ],
)
def test_no_read_scans_a_growing_table(traced: tuple[Store, Path, list[str]], read: str) -> None:
    store, database, statements = traced
    if read == "misses":
        store.note_miss(_miss())
        store.flush(30)
    statements.clear()
    (READS | SCANNING)[read](store)
    selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert selects, f"{read} ran no SELECT through the pool"
    with sqlite3.connect(database) as conn:
        for statement in selects:
            plan = [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]
            scanned = [
                line for line in plan if (found := _SCAN.match(line)) and found.group(1) in GROWING
            ]
            assert not scanned, f"{read}: {scanned} in\n{statement}\n" + "\n".join(plan)


def _miss() -> Miss:
    return Miss(
        cassette="alpha",
        at=1_700_000_000.0,
        kind="freezeframe_replay_miss",
        method="GET",
        url="https://api.example.com/v1/x",
        key="k",
        occurrence=1,
        recorded=0,
        message="no recording",
        context={},
        nearest=(),
    )
