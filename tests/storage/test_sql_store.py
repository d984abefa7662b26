"""The Store contract, run against a real SQLite file and a real PostgreSQL database
(the ``store`` and ``store_url`` fixtures are in conftest.py)."""

import dataclasses
import gc
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.database import (
    AnswerLosingRelay,
    run_sql,
    terminate_freezeframe_backends,
    writes_blocked,
)
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import (
    CassetteNotFound,
    Chunk,
    Exchange,
    ExchangeFilter,
    ExchangeNotFound,
    NewExchange,
    Outcome,
    RecordedResponse,
    SchemaTooNew,
    Slot,
    Store,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    blobs,
    open_store,
)
from freezeframe.storage.sql.prepared import PINNED_LIMIT
from freezeframe.storage.sql.schema import SCHEMA_VERSION

WAIT = 10.0  # seconds; every wait in this file is bounded by it


def make(
    slot: Slot,
    *,
    body: bytes = b"hello",
    response: bool | RecordedResponse = True,
    **changes: Any,
) -> NewExchange:
    """An exchange with plausible values; keyword arguments replace any field.

    ``response`` is the response itself, or whether to give the exchange a plausible one.
    """
    answered = response is not False
    if response is True:
        response = plausible_response(body=body)
    defaults = {
        "started_at": 1_700_000_000.0 + slot.seq,
        "response": response or None,
        "outcome": Outcome.COMPLETE if answered else Outcome.FAILED,
        "error": None if answered else "connection refused",
    }
    return plausible_exchange(slot, **(defaults | changes))


def record(store: Store, **fields: Any) -> NewExchange:
    """Reserve a slot, submit an exchange in it, return what was submitted."""
    exchange = make(store.reserve(fields.get("cassette", "c"), fields.get("key", "k")), **fields)
    store.submit(exchange)
    return exchange


def assert_same(got: Exchange | None, sent: NewExchange) -> None:
    assert got is not None
    for field in dataclasses.fields(NewExchange):
        # Signals are derived and read by triage (Store.triage_rows), not with the exchange.
        if field.name not in {"slot", "signals", "to_read"}:
            assert getattr(got.recorded, field.name) == getattr(sent, field.name), field.name
    assert (got.seq, got.recorded.slot.occurrence) == (sent.slot.seq, sent.slot.occurrence)
    assert len(got.chain) == 64


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


# -- round trips ---------------------------------------------------------------------


def test_every_field_round_trips_byte_exact(store: Store, store_url: str) -> None:
    big_request, big_response = os.urandom(1 << 20), os.urandom(1 << 20)
    sent = [
        record(
            store,
            cassette="kassette-ü",
            key="k1",
            canonical=b"\x00canonical\xff",
            method="PATCH",
            scheme="http",
            host="10.0.0.1",
            port=8080,
            path="/caf\udcc3\udca9/\x00?q=\uffff&x=%00",
            http_version="HTTP/2.0",
            request_headers=(
                (b"X-Dup", b"1"),
                (b"x-dup", b"2"),
                (b"X-Dup", b"3"),
                (b"x-bin", b"\x00\x01\x7f\x80\xfe\xff caf\xc3\xa9"),
                (b"\xff\xfename", b""),
            ),
            request_body=big_request,
            started_at=1_700_000_123.456789,
            duration=12.000001,
            response=RecordedResponse(
                status=206,
                reason="Partial \x00 Content \udc80",
                http_version="HTTP/2.0",
                headers=((b"content-encoding", b"gzip"), (b"set-cookie", b"\xff"), (b"a", b"")),
                body=big_response,
                chunks=tuple(Chunk(i * 4096, 0.001 * i + 1e-9) for i in range(256)),
                first_byte_at=0.000123,
                trailers=((b"grpc-status", b"0"), (b"grpc-status", b"\x80")),
            ),
            outcome=Outcome.TRUNCATED,
            error="peer reset \udcff \x00 after 1 MB",
            context={"run-id": "r-1", "session-id": "s\udc80", "empty": ""},
        ),
        record(
            store,
            cassette="kassette-ü",
            key="k2",
            request_headers=(),
            request_body=b"",
            body=b"",
            duration=None,
            context={},
        ),
        record(store, cassette="kassette-ü", key="k3", response=False, duration=None),
        record(
            store,
            cassette="kassette-ü",
            key="k4",
            response=False,
            outcome=Outcome.INCOMPLETE,
            error=None,
            started_at=1,
            duration=2,
        ),
    ]
    store.flush(WAIT)
    for exchange in sent:
        assert_same(store.lookup("kassette-ü", exchange.key, 0), exchange)
        assert_same(store.exchange("kassette-ü", exchange.slot.seq), exchange)
    store.close()
    with open_store(store_url) as reopened:
        for exchange in sent:
            assert_same(reopened.lookup("kassette-ü", exchange.key, 0), exchange)
        assert reopened.verify("kassette-ü").ok


def test_any_text_round_trips(store: Store) -> None:
    """Text fields keep lone surrogates (from surrogateescape), NUL and U+FFFF."""
    characters = st.one_of(
        st.characters(),
        st.characters(categories=["Cs"]),
        st.sampled_from(["\x00", "\uffff", "\\", '"']),
    )
    text = st.text(characters, max_size=20)
    keys = itertools.count()

    @settings(max_examples=40, deadline=None)
    @given(path=text, error=text, value=text, header=st.binary(max_size=20))
    def check(path: str, error: str, value: str, header: bytes) -> None:
        key = f"key-{next(keys)}"
        sent = record(
            store,
            key=key,
            path=path,
            error=error,
            context={value: value},
            request_headers=((header, header),),
        )
        store.flush(WAIT)
        assert_same(store.lookup("c", key, 0), sent)

    check()
    assert store.verify("c").ok


def test_equal_bodies_are_stored_once(store: Store, store_url: str) -> None:
    body = b"the same long answer " * 500
    record(store, key="a", body=body, request_body=body)
    record(store, key="b", body=body, request_body=b"")
    record(store, cassette="other", key="a", body=body, request_body=b"")
    store.flush(WAIT)

    [(count, stored_size)] = run_sql(
        store_url,
        "SELECT count(*), sum(stored_size) FROM blobs WHERE digest NOT IN "
        "(SELECT canonical_digest FROM exchanges WHERE canonical_digest IS NOT NULL)",
    )
    assert count == 1
    assert stored_size < len(body)
    assert store.lookup("c", "b", 0).recorded.response.body == body  # type: ignore[union-attr]
    sizes = {summary.name: summary.stored_bytes for summary in store.cassettes()}
    assert sizes == {"c": stored_size, "other": stored_size}


# -- slots and counts ----------------------------------------------------------------


def test_reserve_orders_by_arrival_and_continues_after_reopen(store: Store, store_url: str) -> None:
    slots = [store.reserve("c", key) for key in ["a", "b", "a", "a"]]
    assert slots == [Slot(0, 0), Slot(1, 0), Slot(2, 1), Slot(3, 2)]
    assert store.reserve("other", "a") == Slot(0, 0)
    # Answers arrive out of order, and the slot at seq 3 is never submitted.
    for slot, key in reversed(list(zip(slots[:3], ["a", "b", "a"], strict=True))):
        store.submit(make(slot, key=key))
    store.close()

    with open_store(store_url) as reopened:
        assert reopened.count("c", "a") == 2
        assert reopened.reserve("c", "a") == Slot(3, 2)
        assert reopened.reserve("c", "b") == Slot(4, 1)
        assert reopened.reserve("c", "new") == Slot(5, 0)
        assert reopened.reserve("other", "a") == Slot(0, 0)


def test_reserve_is_thread_safe(store: Store) -> None:
    slots: list[tuple[str, Slot]] = []

    def claim(key: str) -> None:
        for _ in range(200):
            slots.append((key, store.reserve("c", key)))

    threads = [threading.Thread(target=claim, args=(f"k{i % 3}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(slot.seq for _, slot in slots) == list(range(1600))
    for key in {"k0", "k1", "k2"}:
        occurrences = sorted(slot.occurrence for k, slot in slots if k == key)
        assert occurrences == list(range(len(occurrences)))


def test_lookup_returns_the_nth_occurrence(store: Store) -> None:
    slots = [store.reserve("c", "k") for _ in range(3)]
    store.reserve("c", "other")
    for slot in reversed(slots):
        store.submit(make(slot, body=b"answer %d" % slot.occurrence))
    store.flush(WAIT)

    for n in range(3):
        found = store.lookup("c", "k", n)
        assert found is not None and found.recorded.response is not None
        assert found.recorded.response.body == b"answer %d" % n
    assert store.lookup("c", "k", 3) is None
    assert store.lookup("c", "other", 0) is None
    assert store.lookup("nope", "k", 0) is None


def test_count_and_lookup_see_submitted_exchanges_before_they_are_written(
    store: Store, store_url: str
) -> None:
    with writes_blocked(store_url):
        sent = record(store)
        assert store.count("c", "k") == 1
        assert store.count("c", "other") == 0
        assert store.has_cassette("c")
        waiting, found = in_thread(lambda: store.lookup("c", "k", 0))
        listing, listed = in_thread(lambda: store.exchanges("c"))
        waiting.join(0.3)
        # Both wait for the writer rather than missing it (or, the listing, saying there is
        # no such cassette): the case file asks right after an agent's last request.
        assert waiting.is_alive() and listing.is_alive()
    waiting.join(WAIT)
    listing.join(WAIT)
    assert_same(found[0], sent)
    assert [summary.seq for summary in listed[0]] == [0]
    assert store.count("c", "k") == 1


def test_has_cassette(store: Store) -> None:
    assert not store.has_cassette("c")
    store.reserve("c", "k")
    assert not store.has_cassette("c")
    record(store)
    assert store.has_cassette("c")
    store.flush(WAIT)
    assert store.has_cassette("c")


# -- listings ------------------------------------------------------------------------


def test_candidates_rank_same_request_line_first(store: Store) -> None:
    recorded = [
        ("POST", "api.x", "/v1/other"),
        ("GET", "api.x", "/v1/chat?x=1"),
        ("POST", "api.y", "/v1/chat"),
        ("POST", "api.x", "/v1/chat?stream=1"),
        ("POST", "api.x", "/v1/chat"),
        ("POST", "api.x", "/v1/chatty"),
    ]
    for n, (method, host, path) in enumerate(recorded):
        record(store, key=f"k{n}", method=method, host=host, path=path)
    record(store, cassette="elsewhere", key="k9")
    store.flush(WAIT)

    found = store.candidates("c", "POST", "api.x", "/v1/chat?z=9")
    assert [candidate.seq for candidate in found] == [3, 4, 1, 0, 5, 2]
    assert found[0].canonical == b"POST /v1/chat k3"
    assert found[0].url == "https://api.x/v1/chat?stream=1"
    assert (found[0].key, found[0].occurrence, found[0].method) == ("k3", 0, "POST")
    assert [c.seq for c in store.candidates("c", "POST", "api.x", "/v1/chat", limit=3)] == [3, 4, 1]
    assert store.candidates("nope", "GET", "api.x", "/") == []


def test_cassette_and_exchange_summaries(store: Store) -> None:
    assert store.cassettes() == []
    record(store, cassette="b", key="k", body=b"x" * 100, port=8443)
    record(store, cassette="b", key="k", response=False, scheme="http", port=80, host="::1")
    record(store, cassette="a", key="k", started_at=5.0, duration=None, context={})
    store.flush(WAIT)

    a, b = store.cassettes()
    assert (a.name, a.exchanges, a.first_at, a.last_at) == ("a", 1, 5.0, 5.0)
    assert (b.name, b.exchanges, b.first_at, b.last_at) == (
        "b",
        2,
        1_700_000_000.0,
        1_700_000_001.0,
    )
    assert 0 < a.stored_bytes and 0 < b.stored_bytes

    first, second = store.exchanges("b")
    assert (first.seq, first.occurrence, first.key, first.method) == (0, 0, "k", "POST")
    assert first.url == "https://api.example.com:8443/v1/chat"
    assert (first.status, first.outcome, first.response_bytes) == (200, Outcome.COMPLETE, 100)
    assert (first.started_at, first.duration, first.context) == (
        1_700_000_000.0,
        0.5,
        {"run-id": "run-1"},
    )
    assert second.url == "http://[::1]/v1/chat"
    assert (second.occurrence, second.status, second.outcome) == (1, None, Outcome.FAILED)
    assert second.response_bytes == 0

    with pytest.raises(CassetteNotFound, match="no cassette named 'nope'"):
        store.exchanges("nope")
    with pytest.raises(ExchangeNotFound, match="cassette 'b' has no exchange 7"):
        store.exchange("b", 7)
    with pytest.raises(CassetteNotFound):
        store.exchange("nope", 0)


# -- the writer ----------------------------------------------------------------------


def test_close_drains_everything_submitted(store: Store, store_url: str) -> None:
    sent = [record(store, key=f"k{n % 7}", body=b"%d" % n) for n in range(500)]
    closing, _ = in_thread(store.close)
    closing.join(60)
    assert not closing.is_alive()

    with open_store(store_url) as reopened:
        assert [summary.seq for summary in reopened.exchanges("c")] == list(range(500))
        assert_same(reopened.exchange("c", 499), sent[499])
        report = reopened.verify("c")
        assert (report.ok, report.checked) == (True, 500)


def test_a_closed_store_refuses_work(store: Store) -> None:
    store.close()
    store.close()
    store.flush(WAIT)
    with pytest.raises(StoreClosed):
        store.submit(make(Slot(0, 0)))
    with pytest.raises(StoreClosed):
        store.reserve("c", "k")
    with pytest.raises(StoreClosed, match="is closed"):
        store.lookup("c", "k", 0)


def test_a_failing_exchange_costs_only_itself_and_a_taken_slot_moves_to_a_free_one(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="freezeframe.storage")
    with writes_blocked(store_url):  # so that all of them land in one batch
        first = record(store)
        # The same slot again, as another process recording the cassette would give it.
        store.submit(dataclasses.replace(first, key="clash"))
        store.submit(make(store.reserve("c", "k"), request_body="not bytes"))
        last = record(store)
    store.flush(WAIT)

    assert [(s.seq, s.key) for s in store.exchanges("c")] == [(0, "k"), (1, "clash"), (2, "k")]
    assert_same(store.lookup("c", "k", 0), first)
    assert_same(store.lookup("c", "k", 2), last)
    assert store.count("c", "k") == 2
    assert store.lookup("c", "clash", 0) is not None
    assert store.verify("c").ok
    messages = [r.getMessage() for r in caplog.records if r.name == "freezeframe.storage"]
    assert any("retrying them one by one" in message for message in messages)
    assert sum("dropping it" in message for message in messages) == 1
    assert any("exchange 0 of cassette 'c' is stored as 1" in message for message in messages)
    assert all("\n" not in message for message in messages)


# -- the hash chain ------------------------------------------------------------------

TAMPERING = {  # what is done behind the store's back: first_break, checked, detail
    "status changed": (["UPDATE exchanges SET status = 201 WHERE seq = 2"], 2, 2, "was changed"),
    "body replaced": (
        ["UPDATE blobs SET data = :evil WHERE digest = :body1"],
        1,
        1,
        "response body " + blobs.digest(b"body 1")[:16] + " does not match its digest",
    ),
    "body deleted": (["DELETE FROM blobs WHERE digest = :body1"], 1, 1, "is missing"),
    "row deleted": (["DELETE FROM exchanges WHERE seq = 1"], 2, 1, "after exchange 0"),
    "rows reordered": (
        [
            "UPDATE exchanges SET id = id + 1000 WHERE seq = 1",
            "UPDATE exchanges SET id = id - 1 WHERE seq = 2",
            "UPDATE exchanges SET id = id - 999 WHERE seq = 1",
        ],
        2,
        1,
        "deleted or reordered",
    ),
}


@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_verify_finds_the_first_break(store: Store, store_url: str, tampering: str) -> None:
    for n in range(4):
        record(store, key=f"k{n}", body=b"body %d" % n)
    store.flush(WAIT)
    assert store.verify("c") == store.verify("c")
    report = store.verify("c")
    assert (report.cassette, report.checked, report.ok, report.first_break) == ("c", 4, True, None)

    statements, first_break, checked, detail = TAMPERING[tampering]
    params = {"evil": blobs.compress(b"evil"), "body1": blobs.digest(b"body 1")}
    run_sql(store_url, *statements, **params)

    report = store.verify("c")
    assert (report.ok, report.first_break, report.checked) == (False, first_break, checked)
    assert f"exchange {first_break}" in report.detail
    assert detail in report.detail
    assert "\n" not in report.detail


def test_verify_notices_exchanges_deleted_from_the_end(store: Store, store_url: str) -> None:
    for n in range(3):
        record(store, key=f"k{n}")
    store.flush(WAIT)
    run_sql(store_url, "DELETE FROM exchanges WHERE seq = 2")
    report = store.verify("c")
    assert (report.ok, report.first_break, report.checked) == (False, None, 2)
    assert "ends at exchange 1" in report.detail

    run_sql(store_url, "DELETE FROM exchanges")
    report = store.verify("c")
    assert (report.ok, report.checked) == (False, 0)
    assert "deleted" in report.detail


def test_verify_an_unknown_cassette(store: Store) -> None:
    with pytest.raises(CassetteNotFound):
        store.verify("nope")


# -- opening -------------------------------------------------------------------------


def test_a_newer_schema_is_refused(store_url: str) -> None:
    open_store(store_url).close()
    run_sql(store_url, "UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(SchemaTooNew) as caught:
        open_store(store_url)
    message = str(caught.value)
    assert message.startswith("store schema version 99 at ")
    supported = f"is newer than this freezeframe supports ({SCHEMA_VERSION}); upgrade freezeframe"
    assert message.endswith(supported)


def assert_one_line(error: StoreError, starts: str, *, secret: str = "s3cr3t-pw") -> None:
    message = str(error)
    assert message.startswith(starts), message
    assert "\n" not in message
    assert secret not in message


def test_an_unreachable_postgresql_is_unavailable() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        open_store("postgresql://postgres:s3cr3t-pw@127.0.0.1:1/test")
    assert_one_line(
        caught.value, "cannot open store at postgresql://postgres:***@127.0.0.1:1/test: "
    )


@pytest.mark.postgres
def test_a_missing_postgresql_database_is_unavailable(postgres_url: str) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        open_store("postgresql+psycopg://postgres:s3cr3t-pw@127.0.0.1:5432/ff_no_such_db")
    assert_one_line(caught.value, "cannot open store at postgresql+psycopg://postgres:***@")
    assert 'database "ff_no_such_db" does not exist' in str(caught.value)


def test_a_sqlite_directory_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreUnavailable) as caught:
        open_store(f"sqlite:///{tmp_path}/file/sub/freezeframe.db")
    assert_one_line(caught.value, f"cannot open store at sqlite:///{tmp_path}/file/sub/")
    assert f"cannot create directory {tmp_path}/file/sub" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("not a url", "not a store URL"),
        ("mysql://root:s3cr3t-pw@db/ff", "unsupported backend 'mysql'"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
    ],
)
def test_urls_that_are_not_stores(url: str, reason: str) -> None:
    with pytest.raises(StoreUnavailable, match=reason) as caught:
        open_store(url)
    assert_one_line(caught.value, "cannot open store at ")


def test_flush_gives_up_after_its_timeout(store: Store, store_url: str) -> None:
    with writes_blocked(store_url):
        record(store)
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"did not finish writing within 0\.2s"):
            store.flush(0.2)
        assert time.monotonic() - started < WAIT
    store.flush(WAIT)
    assert store.count("c", "k") == 1


# -- the hot paths: forms as blobs, known digests, kept read connections ---------------

FORM = b'{"method":"POST","body":{"messages":["' + b"the same long conversation " * 400 + b'"]}}'


def test_canonical_forms_are_stored_once_and_compressed(store: Store, store_url: str) -> None:
    sent = [record(store, key="same", canonical=FORM, body=b"%d" % n) for n in range(3)]
    sent.append(record(store, key="other", canonical=FORM + b" "))
    sent.append(record(store, key="empty", canonical=b""))
    store.flush(WAIT)

    rows = run_sql(store_url, "SELECT canonical, canonical_digest FROM exchanges ORDER BY seq")
    assert [(bytes(form), name) for form, name in rows] == [
        (b"", blobs.digest(FORM)),
        (b"", blobs.digest(FORM)),
        (b"", blobs.digest(FORM)),
        (b"", blobs.digest(FORM + b" ")),
        (b"", None),
    ]
    [(size, stored_size)] = run_sql(
        store_url,
        "SELECT size, stored_size FROM blobs WHERE digest = :form",
        form=blobs.digest(FORM),
    )
    assert size == len(FORM) and stored_size < len(FORM) // 10

    for exchange in sent:
        assert_same(store.lookup("c", exchange.key, exchange.slot.occurrence), exchange)
        assert_same(store.exchange("c", exchange.slot.seq), exchange)
    assert {c.canonical for c in store.candidates("c", "POST", "api.example.com", "/v1/chat")} == {
        FORM,
        FORM + b" ",
        b"",
    }
    assert store.verify("c").ok
    # What the cassette list counts is still the bodies alone.
    [(bodies,)] = run_sql(
        store_url,
        "SELECT sum(stored_size) FROM blobs WHERE digest NOT IN "
        "(SELECT canonical_digest FROM exchanges WHERE canonical_digest IS NOT NULL)",
    )
    assert [summary.stored_bytes for summary in store.cassettes()] == [bodies]


@pytest.mark.parametrize(
    ("statement", "detail"),
    [
        ("UPDATE blobs SET data = :evil WHERE digest = :form", "does not match its digest"),
        ("UPDATE blobs SET data = :junk WHERE digest = :form", "cannot be decompressed"),
        ("DELETE FROM blobs WHERE digest = :form", "is missing"),
    ],
)
def test_a_damaged_canonical_form_is_found(store_url: str, statement: str, detail: str) -> None:
    with open_store(store_url) as store:
        for n in range(3):
            record(store, key=f"k{n}", canonical=FORM + b"%d" % n)
    params = {
        "form": blobs.digest(FORM + b"1"),
        "evil": blobs.compress(b"evil"),
        "junk": b"not zstd",
    }
    run_sql(store_url, statement, **params)

    with open_store(store_url) as store:
        report = store.verify("c")
        assert (report.ok, report.first_break, report.checked) == (False, 1, 1)
        assert f"exchange 1: its canonical form body {params['form'][:16]}" in report.detail
        assert detail in report.detail
        if "evil" not in statement:  # a changed form reads back as what is stored
            with pytest.raises(StoreError, match="run freezeframe verify"):
                store.lookup("c", "k1", 0)
        assert store.lookup("c", "k0", 0) is not None


def test_a_body_deleted_behind_the_stores_back_is_stored_again(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer skips the bodies it knows it stored; when one is gone, it stores it again
    rather than drop the exchange that needs it."""
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    record(store, key="a", body=b"the answer", canonical=FORM)
    store.flush(WAIT)
    run_sql(
        store_url,
        "DELETE FROM blobs WHERE digest IN (:body, :form)",
        body=blobs.digest(b"the answer"),
        form=blobs.digest(FORM),
    )
    again = record(store, key="b", body=b"the answer", canonical=FORM)
    store.flush(WAIT)

    assert_same(store.lookup("c", "b", 0), again)
    assert store.count("c", "b") == 1
    assert not [r for r in caplog.records if "dropping it" in r.getMessage()]


def test_writes_of_another_store_on_the_same_database_are_seen(store_url: str) -> None:
    """Two proxies on one database: each reads what the other wrote, bodies shared."""
    with open_store(store_url) as first, open_store(store_url) as second:
        assert first.lookup("c", "k", 0) is None
        assert second.lookup("c", "k", 0) is None
        sent = record(first, canonical=FORM, body=b"shared")
        first.flush(WAIT)
        assert_same(second.lookup("c", "k", 0), sent)
        other = record(second, cassette="d", canonical=FORM, body=b"shared")
        second.flush(WAIT)
        assert_same(first.lookup("d", "k", 0), other)
        assert first.verify("c").ok and first.verify("d").ok
    [(count,)] = run_sql(store_url, "SELECT count(*) FROM blobs")
    assert count == 3  # the request body, the response body and the form


def checked_out(store: Store) -> int:
    return int(store._engine.pool.checkedout())  # type: ignore[attr-defined]


def test_read_connections_are_kept_per_thread_and_given_back(store: Store) -> None:
    sent = record(store, canonical=FORM)
    store.flush(WAIT)
    assert_same(store.lookup("c", "k", 0), sent)
    baseline = checked_out(store)  # the writer's and this thread's
    barrier = threading.Barrier(PINNED_LIMIT + 3)
    errors: list[BaseException] = []

    def replay() -> None:
        try:
            barrier.wait(WAIT)
            for _ in range(20):
                assert_same(store.lookup("c", "k", 0), sent)
                assert store.lookup("c", "missing", 0) is None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replay) for _ in range(PINNED_LIMIT + 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not errors
    del threads
    gc.collect()
    # Threads that ended gave theirs back; at most PINNED_LIMIT were ever kept.
    assert checked_out(store) == baseline


def test_closing_gives_back_the_connections_of_live_threads(store_url: str) -> None:
    store = open_store(store_url)
    record(store)
    store.flush(WAIT)
    looked_up, finish = threading.Event(), threading.Event()

    def reader() -> None:
        store.lookup("c", "k", 0)
        looked_up.set()
        finish.wait(WAIT)

    thread = threading.Thread(target=reader)
    thread.start()
    assert looked_up.wait(WAIT)
    store.close()
    assert checked_out(store) == 0
    finish.set()
    thread.join(WAIT)


@pytest.mark.postgres
def test_connections_lost_with_the_server_are_replaced(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    with open_store(postgres_url) as store:
        first = record(store, key="a")
        store.flush(WAIT)
        assert_same(store.lookup("c", "a", 0), first)  # this thread keeps a connection
        assert terminate_freezeframe_backends(postgres_url) >= 2  # it and the writer's

        assert_same(store.lookup("c", "a", 0), first)
        second = record(store, key="b")
        store.flush(WAIT)
        assert_same(store.lookup("c", "b", 0), second)
        assert store.verify("c").ok
    assert not [r for r in caplog.records if "dropping it" in r.getMessage()]


@pytest.mark.postgres
def test_a_commit_whose_answer_was_lost_is_stored_once(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The server commits a batch and the connection drops before the answer arrives: the
    writer's retry finds the exchanges already there and counts them as written, rather than
    moving them to the next free seq as if another process had taken their place."""
    caplog.set_level(logging.INFO, logger="freezeframe.storage")
    relay = AnswerLosingRelay()
    try:
        with open_store(relay.url(postgres_url)) as store:
            first = record(store, key="a")
            store.flush(WAIT)
            relay.armed.set()
            lost = [record(store, key="b"), record(store, key="a")]
            store.flush(WAIT)
            assert relay.tripped.is_set(), "the relay never dropped a COMMIT's answer"
            after = record(store, key="c")
            store.flush(WAIT)
            stored = [(e.seq, e.key, e.occurrence) for e in store.exchanges("c")]
            assert stored == [(0, "a", 0), (1, "b", 0), (2, "a", 1), (3, "c", 0)]
            for sent in (first, *lost, after):
                assert_same(store.lookup("c", sent.key, sent.slot.occurrence), sent)
            assert store.verify("c").ok
    finally:
        relay.close()
    assert "already stored" in caplog.text
    assert not [r for r in caplog.records if "dropping it" in r.getMessage()]


def test_a_failing_batch_is_still_split(store: Store) -> None:
    """Known digests do not hide a bad exchange: it still costs only itself."""
    good = record(store, canonical=FORM)
    store.submit(make(store.reserve("c", "k"), request_body="not bytes"))
    later = record(store, canonical=FORM)
    store.flush(WAIT)
    assert_same(store.lookup("c", "k", 0), good)
    assert_same(store.lookup("c", "k", 2), later)
    assert store.verify("c").ok


def test_the_cassette_list_counts_a_cassette_again_only_once_it_has_moved(
    store: Store, store_url: str
) -> None:
    """ls reads one totals row per cassette, kept at the head it was counted at: a store of
    a million exchanges lists as fast as one of a thousand."""
    record(store, cassette="a", key="k")
    record(store, cassette="a", key="k")
    record(store, cassette="b", key="k")
    store.flush(WAIT)
    assert [(c.name, c.exchanges) for c in store.cassettes()] == [("a", 2), ("b", 1)]
    kept = run_sql(
        store_url,
        "SELECT c.name, t.exchanges FROM cassette_totals t JOIN cassettes c "
        "ON c.id = t.cassette_id AND c.head = t.head ORDER BY c.name",
    )
    assert [tuple(row) for row in kept] == [("a", 2), ("b", 1)]
    before = {c.name: c for c in store.cassettes()}

    record(store, cassette="a", key="other", started_at=1_800_000_000.0)
    store.flush(WAIT)
    after = {c.name: c for c in store.cassettes()}
    assert (after["a"].exchanges, after["a"].last_at) == (3, 1_800_000_000.0)
    assert after["a"].stored_bytes >= before["a"].stored_bytes
    assert after["b"] == before["b"]
    assert store.cassettes(ExchangeFilter.parse(None, None, "200"))[0].exchanges == 3


def test_ls_counts_each_cassettes_failures_once_and_again_when_it_moves(
    store: Store, store_url: str
) -> None:
    """The case file's list of cassettes says how many exchanges of each failed. Counting
    them read every exchange of every cassette on each view (20 s at a million exchanges);
    they are counted with the cached totals, again only when a cassette has moved."""

    def add(key: str, **changes: Any) -> None:
        store.submit(plausible_exchange(store.reserve("c", key), cassette="c", key=key, **changes))
        store.flush(30)

    add("ok")
    add("error", response=plausible_response(status=500))
    add("cut", response=None, outcome=Outcome.FAILED, error="refused")
    [listed] = store.cassettes()
    assert listed.failed == 2 == store.overview("c").failed
    add("limited", response=plausible_response(status=429))
    [listed] = store.cassettes()
    assert listed.failed == 3
    run_sql(store_url, "UPDATE cassette_totals SET failed = NULL")  # counted before version 10
    [listed] = store.cassettes()
    assert listed.failed == 3
    assert run_sql(store_url, "SELECT failed FROM cassette_totals") == [(3,)]
    [filtered] = store.cassettes(ExchangeFilter(status=429))
    assert filtered.failed is None
