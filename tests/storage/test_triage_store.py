"""Triage's part of the store, on SQLite and PostgreSQL: signals stored with an exchange and
read back without a body, a version-7 store migrated and its exchanges signed by a rebuild,
and case notes."""

from __future__ import annotations

import dataclasses

import pytest
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.evidence.signatures import SIGNATURE_VERSION, with_signals
from freezeframe.evidence.triage import find_groups, pending_count, rebuild
from freezeframe.storage import (
    CassetteNotFound,
    Edit,
    ExchangeNotFound,
    NewExchange,
    Note,
    Signals,
    Store,
    open_store,
)
from freezeframe.storage.sql.schema import SCHEMA_VERSION

NOT_FOUND = plausible_response(
    status=404, reason="Not Found", body=b'{"error": "order 8812 not found"}'
)


def failing(store: Store, cassette: str, order: int, *, signed: bool = True) -> NewExchange:
    """A tool call answered 404, submitted with its signals (or without, as before v8)."""
    key = f"{cassette}-{order}"
    exchange = plausible_exchange(
        store.reserve(cassette, key),
        cassette=cassette,
        key=key,
        method="GET",
        host="orders.internal",
        path=f"/orders/{order}",
        request_body=b"",
        response=dataclasses.replace(
            NOT_FOUND, body=f'{{"error": "order {order} not found"}}'.encode()
        ),
    )
    exchange = with_signals(exchange) if signed else exchange
    store.submit(exchange)
    store.flush(10)
    return exchange


def test_signals_are_stored_with_the_exchange_and_read_without_a_body(store: Store) -> None:
    failing(store, "day", 8812)
    failing(store, "day", 9120)
    rows = store.triage_rows()
    assert [(r.cassette, r.seq, r.run_id, r.kind) for r in rows] == [
        ("day", 0, "run-1", "tool_error"),
        ("day", 1, "run-1", "tool_error"),
    ]
    assert (
        rows[0].signature
        == rows[1].signature
        == ("tool_error GET orders.internal/orders/{id} 404: order {n} not found")
    )
    assert store.triage_rows(cassettes=["other"]) == []
    assert store.triage_rows(since=1_800_000_000.0) == []
    assert store.unsigned(SIGNATURE_VERSION) == []
    # Signals are derived: the chain does not cover them.
    store.store_signals("day", {0: Signals(SIGNATURE_VERSION, None, None, None)})
    assert [r.seq for r in store.triage_rows()] == [1]
    assert store.verify("day").ok


def test_a_version_7_store_is_migrated_and_a_rebuild_signs_what_it_held(store_url: str) -> None:
    with open_store(store_url) as store:
        failing(store, "old", 8812, signed=False)
        failing(store, "old", 8813, signed=False)
    sqlite = store_url.startswith("sqlite")
    run_sql(
        store_url,
        "DROP INDEX ix_exchanges_triage",
        *(
            f"ALTER TABLE exchanges DROP COLUMN {name}"
            for name in ("failure_kind", "signature", "trace", "signature_version", "run_failures")
        ),
        "DROP TABLE notes",
        "UPDATE meta SET value = '7' WHERE name = 'schema_version'",
    )
    with open_store(store_url) as store:
        version = "SELECT value FROM meta WHERE name = 'schema_version'"
        assert run_sql(store_url, version) == [(str(SCHEMA_VERSION),)] == [("10",)]
        indexes = (
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            if sqlite
            else "SELECT indexname FROM pg_indexes"
        )
        assert ("ix_exchanges_triage",) in run_sql(store_url, indexes)
        assert store.triage_rows() == []
        assert pending_count(store) == 2
        assert find_groups(store) == []
        seen: list[int] = []
        assert rebuild(store, seen.append) == 2
        assert seen == [1, 1]
        assert pending_count(store) == 0
        [group] = find_groups(store)
        assert (group.kind, group.count, group.runs) == ("tool_error", 2, ("old@run-1",))
        assert store.verify("old").ok, "signing rewrites no chained column"
        store.add_note(Note("old", 1, 1_700_000_100.0, "TICKET-7: the order service is down"))
        assert [n.text for n in store.notes("old")] == ["TICKET-7: the order service is down"]


def test_case_notes_are_kept_found_and_removed_with_their_cassette(store: Store) -> None:
    failing(store, "case", 8812)
    store.add_note(Note("case", None, 1_700_000_001.0, "TICKET-412: refund shown twice"))
    store.add_note(Note("case", 0, 1_700_000_002.0, "cold case: missing tool schema version"))
    assert [(n.seq, n.text) for n in store.notes("case")] == [
        (None, "TICKET-412: refund shown twice"),
        (0, "cold case: missing tool schema version"),
    ]
    assert [n.text for n in store.notes("case", 0)] == ["cold case: missing tool schema version"]
    assert [n.seq for n in store.search_notes("Tool  Schema")] == [0]
    assert store.search_notes("nothing like it") == []
    with pytest.raises(CassetteNotFound):
        store.add_note(Note("nope", None, 1.0, "x"))
    with pytest.raises(ExchangeNotFound):
        store.add_note(Note("case", 7, 1.0, "x"))
    store.remove("case")
    assert store.notes("case") == []


def test_an_edited_fork_leaves_the_edited_answer_to_a_rebuild(store: Store) -> None:
    failing(store, "source", 8812)
    failing(store, "source", 8813)
    fixed = Edit(plausible_response(body=b'{"order": 8812}'), {}, ("status: 404 -> 200",))
    store.fork("source", "edited", edits={0: fixed})
    assert store.unsigned(SIGNATURE_VERSION) == [("edited", 0)]
    assert rebuild(store) == 2
    [group] = find_groups(store)
    assert sorted(group.runs) == ["edited@run-1", "source@run-1"]
    # The edited answer is a 200 now; the other copy still fails, as its source does.
    assert {(o.cassette, o.seq) for o in group.occurrences} == {
        ("source", 0),
        ("source", 1),
        ("edited", 1),
    }


def test_the_last_recheck_of_each_group_replaces_the_one_before(store: Store) -> None:
    from freezeframe.storage import RecheckResult

    assert store.rechecks() == {}
    store.keep_recheck(RecheckResult("loop lookup_order", 10.0, '{"runs": []}'))
    store.keep_recheck(RecheckResult("schema x", 11.0, '{"runs": [1]}'))
    store.keep_recheck(RecheckResult("loop lookup_order", 12.0, '{"runs": [2]}'))
    assert store.rechecks() == {
        "loop lookup_order": RecheckResult("loop lookup_order", 12.0, '{"runs": [2]}'),
        "schema x": RecheckResult("schema x", 11.0, '{"runs": [1]}'),
    }
