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
from support.exchanges import plausible_exchange

from freezeframe.storage import ExchangeFilter, Miss, Store, open_store

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
