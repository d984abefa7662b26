"""Replay answers a preloaded cassette from memory: no statement per lookup (#25).

The store's connections are traced (SQLite's trace callback, a psycopg cursor that notes what
it runs), so "no query" is what the database was asked, not a timing. The table only ever
holds recordings: whatever it does not hold is still found in the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool
from support.exchanges import plausible_exchange, plausible_response, stored_exchange

from freezeframe.storage import Exchange, RecordedResponse, Rekeyed, Store, open_store
from freezeframe.storage.blobs import INLINE_LIMIT
from freezeframe.storage.replaytable import ReplayTable, size_of


class _TracingCursor(psycopg.Cursor[Any]):
    """A psycopg cursor that notes every statement it runs."""

    statements: list[str] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _TracingCursor.statements.append(str(query))
        return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        _TracingCursor.statements.append(str(query))
        return super().executemany(query, params_seq, **kwargs)


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement the connections opened from now run (both databases)."""
    seen: list[str] = []
    _TracingCursor.statements = seen

    def trace(dbapi_connection: Any, record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.set_trace_callback(seen.append)
        else:
            dbapi_connection.cursor_factory = _TracingCursor

    event.listen(Pool, "connect", trace)
    try:
        yield seen
    finally:
        event.remove(Pool, "connect", trace)


def _record(
    store: Store, cassette: str, keys: list[str], response: RecordedResponse | None = None
) -> None:
    """One recording per key, in order, each answered ``answer <cassette> <key> <n>``
    unless ``response`` says otherwise."""
    for n, key in enumerate(keys):
        body = f"{cassette} {key} {n}".encode()
        store.submit(
            plausible_exchange(
                store.reserve(cassette, key),
                cassette=cassette,
                key=key,
                request_body=body,
                response=response or plausible_response(body=b"answer " + body),
            )
        )
    store.flush(30)


def _answer(exchange: Exchange | None) -> bytes | None:
    if exchange is None or exchange.recorded.response is None:
        return None
    return exchange.recorded.response.body


def test_a_preloaded_cassette_is_answered_without_a_query(
    store_url: str, statements: list[str]
) -> None:
    with open_store(store_url) as writer:
        _record(writer, "alpha", ["k1", "k2", "k1", "k3"])
        _record(writer, "beta", ["k1"])
    with open_store(store_url, create=False) as store:
        expected = {
            (key, n): store.lookup("alpha", key, n)
            for key, n in [("k1", 0), ("k2", 0), ("k1", 1), ("k3", 0)]
        }
        assert store.preload("alpha") == 4  # beta is not read
        statements.clear()
        for (key, n), recorded in expected.items():
            assert store.lookup("alpha", key, n) == recorded
        assert statements == []
        assert _answer(store.lookup("alpha", "k1", 1)) == b"answer alpha k1 2"
        # Another cassette, and a recording the cassette does not have, ask the store.
        assert _answer(store.lookup("beta", "k1", 0)) == b"answer beta k1 0"
        assert store.lookup("alpha", "k1", 2) is None
        assert statements, "a lookup the table cannot answer must ask the store"


def test_preload_reads_the_cassette_once_until_unload(
    store_url: str, statements: list[str]
) -> None:
    with open_store(store_url) as store:
        _record(store, "alpha", ["k1", "k2"])
        store.preload("alpha")
        statements.clear()
        store.preload("alpha")
        assert statements == []
        store.unload()
        store.lookup("alpha", "k1", 0)
        assert statements, "after unload() a lookup asks the store again"


def test_what_others_record_after_the_load_is_still_served(store_url: str) -> None:
    """A replica (or this proxy in auto mode) records more occurrences after the load."""
    with open_store(store_url) as store, open_store(store_url) as replica:
        _record(store, "alpha", ["k1"])
        store.preload("alpha")
        _record(replica, "alpha", ["k1", "k9"])
        assert _answer(store.lookup("alpha", "k1", 1)) == b"answer alpha k1 0"
        assert _answer(store.lookup("alpha", "k9", 0)) == b"answer alpha k9 1"


def test_remove_and_rekey_are_not_hidden_by_the_table(store_url: str) -> None:
    with open_store(store_url) as store:
        _record(store, "alpha", ["k1"])
        _record(store, "beta", ["k1"])
        store.preload("alpha")
        store.preload("beta")
        store.remove("alpha")
        assert store.lookup("alpha", "k1", 0) is None
        store.rekey("beta", lambda exchange: Rekeyed("new", 1, exchange.recorded.canonical, {}))
        assert store.lookup("beta", "k1", 0) is None
        assert _answer(store.lookup("beta", "new", 0)) == b"answer beta k1 0"


def test_an_unload_sees_what_another_process_removed(store_url: str) -> None:
    with open_store(store_url) as store, open_store(store_url) as other:
        _record(store, "alpha", ["k1"])
        store.preload("alpha")
        other.remove("alpha")
        store.unload()
        assert store.lookup("alpha", "k1", 0) is None


def test_large_bodies_stay_references(store_url: str) -> None:
    """A body past INLINE_LIMIT is streamed by the re-enactor: the table holds its reference,
    never the body."""
    large = b"x" * (INLINE_LIMIT + 1)
    with open_store(store_url) as store:
        _record(store, "alpha", ["k1"], plausible_response(body=large))
        store.preload("alpha")
        found = store.lookup("alpha", "k1", 0)
        assert found is not None and found.recorded.response is not None
        assert found.recorded.response.body == b"" and found.recorded.response.body_ref is not None
        assert b"".join(store.read_blob(found.recorded.response.body_ref)) == large


def test_a_full_table_holds_what_fits_and_leaves_the_rest_to_the_store() -> None:
    exchanges = [stored_exchange(seq=n, request_body=b"r" * 100) for n in range(5)]
    table = ReplayTable(capacity=size_of(exchanges[0]) * 3)
    assert table.fill("c", exchanges) == 3
    assert table.loaded("c")
    assert [table.get("c", f"k{n}", 0) is not None for n in range(5)] == [True] * 3 + [False] * 2
    table.drop("c")
    assert len(table) == 0 and not table.loaded("c")
    assert table.fill("c", exchanges[:1]) == 1
