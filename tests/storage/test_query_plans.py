"""No read the proxy or the case file makes scans every exchange of the store.

Replay start, a lookup, a run's listing and ``ls`` must cost the same in a store of a million
exchanges as in one of a thousand (#14). Timing them here would prove nothing and fail on a busy
machine, so each statement a read runs is asked for its plan instead (SQLite's EXPLAIN QUERY
PLAN; PostgreSQL's EXPLAIN with sequential scans discouraged, so that one is only chosen when no
index serves, as in a big store), and a full scan of a table that grows with the store fails the
test, naming the statement.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool
from support.database import run_sql
from support.exchanges import plausible_exchange

from freezeframe.storage import ExchangeFilter, Imported, Miss, Slot, Store, open_store

GROWING = ("exchanges", "blobs", "blob_parts", "drifts", "texts", "text_uses", "misses")
"""The tables that grow with what is recorded; cassettes and their totals grow with runs."""

_SCAN = re.compile(r"^SCAN (\w+)")
_SEQ_SCAN = re.compile(r"Seq Scan on (\w+)")

Statement = tuple[str, Any]
"""A statement as the driver ran it, and its parameters (None: already in the text)."""


class _TracingCursor(psycopg.Cursor[Any]):
    """A psycopg cursor that notes every statement it runs, for EXPLAIN."""

    statements: list[Statement] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _TracingCursor.statements.append((str(query), params))
        return super().execute(query, params, **kwargs)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def traced(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Store, str, list[Statement]]]:
    """A store with two cassettes, and the statements its connections run from now."""
    statements: list[Statement] = []
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'freezeframe.db'}"
    else:
        url = str(request.getfixturevalue("postgres_url"))
        _TracingCursor.statements = statements

    def trace(dbapi_connection: Any, record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.set_trace_callback(lambda sql: statements.append((sql, None)))
        else:
            dbapi_connection.cursor_factory = _TracingCursor

    with open_store(url) as store:
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
        with open_store(url, create=False) as store:
            yield store, url, statements
    finally:
        event.remove(Pool, "connect", trace)


READS: dict[str, Callable[[Store], object]] = {
    "open": lambda store: open_store(store.location, create=False).close(),
    "lookup": lambda store: store.lookup("alpha", "alpha-1", 0),
    "preload (replay's table of a cassette)": lambda store: store.preload("alpha"),
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
    "ls of a run": lambda store: store.cassettes(ExchangeFilter(run_id="alpha")),
}


@pytest.mark.parametrize("read", list(READS))
def test_no_read_scans_a_growing_table(
    traced: tuple[Store, str, list[Statement]], read: str
) -> None:
    store, url, statements = traced
    if read == "misses":
        store.note_miss(_miss())
        store.flush(30)
    statements.clear()
    READS[read](store)
    selects = [(sql, params) for sql, params in statements if _reads(sql)]
    assert selects, f"{read} ran no SELECT through the pool"
    for sql, params in selects:
        plan = _plan(url, sql, params)
        scanned = [line for line in plan if _scanned(line) in GROWING]
        assert not scanned, f"{read}: {scanned} in\n{sql}\n" + "\n".join(plan)


def _reads(sql: str) -> bool:
    return sql.lstrip().upper().startswith(("SELECT", "WITH"))


def _scanned(line: str) -> str | None:
    found = _SCAN.match(line) or _SEQ_SCAN.search(line)
    return found.group(1) if found else None


def _plan(url: str, sql: str, params: Any) -> list[str]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("SET enable_seqscan = off")
        return [str(row[0]) for row in conn.execute(f"EXPLAIN {sql}", params)]


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


@pytest.mark.postgres
def test_a_value_most_exchanges_hold_is_searched_newest_first_without_sorting_them_all(
    postgres_url: str,
) -> None:
    """Search lists exchanges newest first. A value nearly every exchange holds (its host, a
    model's name: a third of a million exchanges in a store of a million) must be found by
    reading the exchanges newest first and stopping at the page's end; joining every holder
    and sorting them took 0.26 s at 100,000 exchanges, and grows with the store."""
    held = 3_000
    with open_store(postgres_url) as store:
        store.import_cassette(
            "busy",
            (
                Imported(
                    plausible_exchange(
                        Slot(n, 0),
                        cassette="busy",
                        key=f"k{n}",
                        request_body=f'{{"turn": "t{n}"}}'.encode(),
                        started_at=1_700_000_000.0 + n,
                    )
                )
                for n in range(held)
            ),
        )
    run_sql(postgres_url, "ANALYZE")
    statements: list[Statement] = []
    _TracingCursor.statements = statements

    def trace(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.cursor_factory = _TracingCursor

    event.listen(Pool, "connect", trace)
    try:
        with open_store(postgres_url, create=False) as store:
            hits = store.search("api.example.com", limit=5)
    finally:
        event.remove(Pool, "connect", trace)
    assert [hit.seq for hit in hits] == [held - 1 - n for n in range(5)]
    listing = [(sql, params) for sql, params in statements if "ORDER BY e.started_at" in sql]
    assert len(listing) == 1
    sql, params = listing[0]
    with psycopg.connect(postgres_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        plan = [str(row[0]) for row in conn.execute(f"EXPLAIN ANALYZE {sql}", params)]
    read = [line for line in plan if "on exchanges" in line]
    assert any("ix_exchanges_started_at" in line for line in read), "\n".join(plan)
    rows = [int(found) for line in read for found in re.findall(r"actual .*? rows=(\d+)", line)]
    assert max(rows) < held / 2, "\n".join(plan)
