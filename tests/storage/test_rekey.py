"""Store.rekey: new keys written in place, occurrences renumbered in recorded order, the
cassette re-chained; refused when the chain is already broken. On SQLite and PostgreSQL
(the ``store`` and ``store_url`` fixtures are in conftest.py)."""

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import (
    CassetteNotFound,
    Exchange,
    KeyChange,
    Message,
    NewExchange,
    Rekeyed,
    Store,
    StoreError,
    blobs,
    open_store,
)

WAIT = 10.0  # seconds; every wait in this file is bounded by it


def record(store: Store, key: str, body: bytes, **changes: Any) -> NewExchange:
    """Reserve a slot and submit an exchange answered with ``body``."""
    defaults = {
        "request_body": b'{"ask": "' + body + b'"}',
        "response": plausible_response(headers=(), body=body),
        "stripped": {"body:$.user": "0123456789abcdef"},
        "facts": {"model": "gpt-4o"},
    }
    exchange = plausible_exchange(store.reserve("c", key), key=key, **(defaults | changes))
    store.submit(exchange)
    return exchange


def keyed_by(new_keys: Mapping[bytes, str]) -> Callable[[Exchange], Rekeyed]:
    """A keyer giving each exchange the key its response body maps to, scheme 2."""

    def keyer(exchange: Exchange) -> Rekeyed:
        assert exchange.recorded.response is not None
        key = new_keys[exchange.recorded.response.body]
        return Rekeyed(key, 2, b"form of " + key.encode(), {"query:ts": "f" * 16})

    return keyer


def served(store: Store, key: str) -> list[bytes]:
    """The answers replay serves for ``key``, occurrence by occurrence."""
    answers = []
    for occurrence in range(10):
        found = store.lookup("c", key, occurrence)
        if found is None:
            return answers
        assert found.recorded.response is not None and found.recorded.slot.occurrence == occurrence
        answers.append(found.recorded.response.body)
    raise AssertionError("more occurrences than recorded")


def chains(store_url: str) -> list[Any]:
    return run_sql(store_url, "SELECT id, seq, key, occurrence, chain FROM exchanges ORDER BY id")


def test_unchanged_keys_leave_the_chain_as_it_was(store: Store, store_url: str) -> None:
    for body in (b"a", b"b", b"a2"):
        record(store, "k" if body != b"b" else "other", body)
    record(store, "ws", b"w", messages=(Message(True, True, 0.1, b"hi"),), canonical=b"")
    store.flush(WAIT)
    before = chains(store_url)

    changes = store.rekey(
        "c",
        lambda e: Rekeyed(
            e.recorded.key, e.recorded.key_scheme, e.recorded.canonical, e.recorded.stripped or {}
        ),
    )
    assert changes == [
        KeyChange(0, "k", "k", 0, 0),
        KeyChange(1, "other", "other", 0, 0),
        KeyChange(2, "k", "k", 1, 1),
        KeyChange(3, "ws", "ws", 0, 0),
    ]
    assert chains(store_url) == before
    assert store.verify("c").ok
    assert served(store, "k") == [b"a", b"a2"]


def test_a_collision_is_served_in_recorded_order(store: Store, store_url: str) -> None:
    record(store, "first", b"one")
    record(store, "second", b"two")
    record(store, "first", b"three")
    store.flush(WAIT)
    store.note_drift("c", 1, ["body:$.user"], {"run-id": "r"})
    store.flush(WAIT)
    assert store.count("c", "first") == 2

    changes = store.rekey("c", keyed_by({b"one": "same", b"two": "same", b"three": "same"}))
    assert changes == [
        KeyChange(0, "first", "same", 0, 0),
        KeyChange(1, "second", "same", 0, 1),
        KeyChange(2, "first", "same", 1, 2),
    ]
    assert served(store, "same") == [b"one", b"two", b"three"]
    assert served(store, "first") == served(store, "second") == []
    found = store.exchange("c", 1)
    assert (found.recorded.key, found.recorded.key_scheme, found.recorded.canonical) == (
        "same",
        2,
        b"form of same",
    )
    assert found.recorded.stripped == {"query:ts": "f" * 16}
    assert found.recorded.facts == {"model": "gpt-4o"}  # kept, and so are drift notes and bodies
    assert [d.paths for d in found.drift] == [("body:$.user",)]
    assert store.verify("c").ok

    # The store's own counters follow: recording goes on after the rekeyed exchanges.
    assert (store.count("c", "same"), store.count("c", "first")) == (3, 0)
    later = record(store, "same", b"four")
    assert (later.slot.seq, later.slot.occurrence) == (3, 3)
    store.flush(WAIT)
    assert served(store, "same") == [b"one", b"two", b"three", b"four"]
    report = store.verify("c")
    assert (report.ok, report.checked) == (True, 4)
    [(stored_form,)] = run_sql(store_url, "SELECT canonical_digest FROM exchanges WHERE seq = 0")
    assert stored_form == blobs.digest(b"form of same")


def test_a_split_and_a_swap(store: Store) -> None:
    """One key becoming two, and two keys trading places: the unique (cassette, key,
    occurrence) never sees two rows at once."""
    for body in (b"x1", b"y1", b"x2", b"y2"):
        record(store, "shared", body)
    record(store, "p", b"p")
    record(store, "q", b"q")
    store.flush(WAIT)

    new_keys = {b"x1": "x", b"y1": "y", b"x2": "x", b"y2": "y", b"p": "q", b"q": "p"}
    changes = store.rekey("c", keyed_by(new_keys))
    assert changes == [
        KeyChange(0, "shared", "x", 0, 0),
        KeyChange(1, "shared", "y", 1, 0),
        KeyChange(2, "shared", "x", 2, 1),
        KeyChange(3, "shared", "y", 3, 1),
        KeyChange(4, "p", "q", 0, 0),
        KeyChange(5, "q", "p", 0, 0),
    ]
    assert served(store, "x") == [b"x1", b"x2"]
    assert served(store, "y") == [b"y1", b"y2"]
    assert (served(store, "p"), served(store, "q")) == ([b"q"], [b"p"])
    assert served(store, "shared") == []
    assert store.verify("c").ok


def test_a_rekeyed_cassette_reads_the_same_when_reopened(store_url: str) -> None:
    with open_store(store_url) as store:
        record(store, "a", b"one")
        record(store, "b", b"two")
        store.flush(WAIT)
        store.rekey("c", keyed_by({b"one": "b", b"two": "b"}))
    with open_store(store_url) as reopened:
        assert served(reopened, "b") == [b"one", b"two"]
        assert reopened.verify("c").ok
        later = record(reopened, "b", b"three")
        assert (later.slot.seq, later.slot.occurrence) == (2, 2)


def test_a_tampered_cassette_is_refused_and_left_alone(store: Store, store_url: str) -> None:
    for body in (b"one", b"two", b"three"):
        record(store, body.decode(), body)
    store.flush(WAIT)
    run_sql(store_url, "UPDATE exchanges SET status = 201 WHERE seq = 1")
    before = chains(store_url)
    report = store.verify("c")

    with pytest.raises(StoreError, match=r"hash chain broken at exchange 1 \(exchange 1, "):
        store.rekey("c", keyed_by({b"one": "x", b"two": "x", b"three": "x"}))
    assert chains(store_url) == before
    assert store.verify("c") == report
    assert served(store, "one") == [b"one"]


def test_a_dry_run_reports_the_changes_and_writes_nothing(store: Store, store_url: str) -> None:
    record(store, "a", b"one")
    record(store, "b", b"two")
    store.flush(WAIT)
    before = chains(store_url)
    changes = store.rekey("c", keyed_by({b"one": "same", b"two": "same"}), dry_run=True)
    assert changes == [KeyChange(0, "a", "same", 0, 0), KeyChange(1, "b", "same", 0, 1)]
    assert chains(store_url) == before
    assert (served(store, "a"), served(store, "same")) == ([b"one"], [])


def test_a_failing_keyer_changes_nothing(store: Store, store_url: str) -> None:
    record(store, "a", b"one")
    record(store, "b", b"two")
    store.flush(WAIT)
    before = chains(store_url)
    with pytest.raises(KeyError):
        store.rekey("c", keyed_by({b"one": "x"}))
    assert chains(store_url) == before
    assert served(store, "a") == [b"one"]


def test_a_rekey_that_fails_while_writing_leaves_nothing_half_done(
    store: Store, store_url: str
) -> None:
    record(store, "a", b"one")
    record(store, "b", b"two")
    store.flush(WAIT)
    before = chains(store_url)

    def keyer(exchange: Exchange) -> Rekeyed:
        # The second row moves, so it is parked first; the database then refuses its key.
        key = "a" if exchange.seq == 0 else None
        return Rekeyed(key, 2, b"form", {})  # type: ignore[arg-type]

    with pytest.raises(StoreError, match="cannot rekey in store "):
        store.rekey("c", keyer)
    assert chains(store_url) == before
    assert store.verify("c").ok
    assert (served(store, "a"), served(store, "b")) == ([b"one"], [b"two"])


def test_a_cassette_written_during_rekey_is_refused(store: Store, store_url: str) -> None:
    record(store, "a", b"one")
    store.flush(WAIT)
    before = chains(store_url)

    def keyer(exchange: Exchange) -> Rekeyed:
        with open_store(store_url) as other:  # a proxy nobody stopped
            record(other, "late", b"late")
        return Rekeyed("x", 2, b"x", {})

    with pytest.raises(StoreError, match="changed while it was being rekeyed"):
        store.rekey("c", keyer)
    assert chains(store_url)[:1] == before
    assert store.verify("c").ok


def test_rekey_an_unknown_cassette(store: Store) -> None:
    with pytest.raises(CassetteNotFound):
        store.rekey("nope", keyed_by({}))
