"""Removing a cassette, and opening a store that must already exist, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import CassetteNotFound, Store, StoreNotFound, open_store


def record(store: Store, cassette: str, *bodies: bytes) -> None:
    for n, body in enumerate(bodies):
        key = f"{cassette}-{n}"
        store.submit(
            plausible_exchange(
                store.reserve(cassette, key),
                cassette=cassette,
                key=key,
                response=plausible_response(body=body),
            )
        )
    store.flush(10)


def test_remove_takes_the_cassette_and_only_the_bodies_no_one_else_uses(
    store: Store, store_url: str
) -> None:
    record(store, "doomed", b"shared answer", b"only in doomed", b"only in doomed too")
    record(store, "kept", b"shared answer")
    kept_before = store.cassettes()[1]

    removed = store.remove("doomed")

    assert (removed.cassette, removed.exchanges, removed.bodies) == ("doomed", 3, 5)
    assert removed.freed > 0
    assert store.cassette_names() == ["kept"]
    assert store.cassettes() == [kept_before]
    assert store.verify("kept").ok
    assert store.exchange("kept", 0).recorded.response.body == b"shared answer"  # type: ignore[union-attr]
    digests = {row[0] for row in run_sql(store_url, "SELECT digest FROM blobs")}
    assert len(digests) == 3, "kept's request, form and answer; doomed's own are gone"
    with pytest.raises(CassetteNotFound):
        store.exchanges("doomed")
    with pytest.raises(CassetteNotFound):
        store.remove("doomed")


def test_a_removed_cassette_is_recorded_again_from_seq_zero_with_a_chain_that_verifies(
    store: Store,
) -> None:
    record(store, "again", b"one", b"two")
    store.remove("again")
    record(store, "again", b"one")
    assert [row.seq for row in store.exchanges("again")] == [0]
    assert store.lookup("again", "again-0", 0) is not None
    assert store.verify("again").ok


def test_a_body_deleted_with_its_cassette_is_stored_again_when_it_recurs(store: Store) -> None:
    record(store, "first", b"recurring body")
    store.remove("first")
    record(store, "second", b"recurring body")
    found = store.lookup("second", "second-0", 0)
    assert found is not None and found.recorded.response is not None
    assert found.recorded.response.body == b"recurring body"


def test_opening_without_create_refuses_a_missing_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "freezeframe.db"
    with pytest.raises(StoreNotFound, match=f"no store at {path}"):
        open_store(f"sqlite:///{path}", create=False)
    assert not path.parent.exists()
    with open_store(f"sqlite:///{path}"):
        pass
    with open_store(f"sqlite:///{path}", create=False) as opened:
        assert opened.cassette_names() == []


@pytest.mark.postgres
def test_opening_without_create_refuses_an_empty_postgresql_database(postgres_url: str) -> None:
    with pytest.raises(StoreNotFound, match="no freezeframe store in postgresql"):
        open_store(postgres_url, create=False)
    tables = run_sql(postgres_url, "SELECT count(*) FROM pg_tables WHERE tablename = 'meta'")
    assert tables == [(0,)], "nothing was created"
