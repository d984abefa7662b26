"""What schema version 4 keeps beside each exchange: facts, stripped digests, WebSocket
messages and drift notes, and the listings filtered by them; on SQLite and PostgreSQL
(the ``store`` and ``store_url`` fixtures are in conftest.py)."""

import logging
import time
from typing import Any

import pytest
from support.database import run_sql, terminate_freezeframe_backends, writes_blocked
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import (
    FACT_NAMES,
    CassetteNotFound,
    ExchangeFilter,
    Message,
    NewExchange,
    Outcome,
    Store,
    StoreClosed,
    StoreError,
    blobs,
    open_store,
)
from freezeframe.storage.transcript import encode

WAIT = 10.0  # seconds; every wait in this file is bounded by it

FACTS = {
    "provider": "openai",
    "api": "openai.chat-completions",
    "model": "gpt-4o",
    "answered_model": "gpt-4o-2024-08-06",
    "temperature": 0.25,
    "top_p": 1,  # an int where a float is expected: read back as 1.0
    "seed": -(2**63),
    "max_tokens": 512,
    "stream": False,
    "system_fingerprint": "fp_\x00\udc80",  # text no column takes as it is
    "response_id": "chatcmpl-1",
    "request_id": "req_1",
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details.cached": 0},
    "finish_reason": "stop",
    "rate_limits": {"x-ratelimit-remaining-requests": "99", "retry-after": "1"},
    "trace_id": "0af7651916cd43dd8448eb211c80319c",
    "parent_span_id": "b7ad6b7169203331",
}
MESSAGES = (
    Message(from_client=True, text=True, at=0.01, data='{"type":"hello ✓"}'.encode()),
    Message(from_client=False, text=False, at=0.25, data=bytes(range(256))),
    Message(from_client=False, text=True, at=0.5, data=b""),
)


def record(store: Store, *, cassette: str = "c", key: str = "k", **changes: Any) -> NewExchange:
    """Reserve a slot and submit a plausible exchange in it; keywords replace any field,
    ``status`` the response's."""
    answer = plausible_response(status=changes.pop("status", 200), headers=(), body=b"answer")
    slot = store.reserve(cassette, key)
    exchange = plausible_exchange(
        slot, cassette=cassette, key=key, **({"response": answer} | changes)
    )
    store.submit(exchange)
    return exchange


# -- facts, stripped digests and messages ------------------------------------------


def test_facts_stripped_and_messages_round_trip(store: Store, store_url: str) -> None:
    stripped = {"body:$.user": "0123456789abcdef", "query:ts": "fedcba9876543210"}
    full = record(store, key="ws", facts=FACTS, stripped=stripped, messages=MESSAGES)
    quiet = record(store, key="quiet", messages=())
    plain = record(store, key="plain", facts={"model": "m", "seed": None})
    store.flush(WAIT)

    expected_facts = FACTS | {"top_p": 1.0}
    for found in (store.lookup("c", "ws", 0), store.exchange("c", 0)):
        assert found is not None
        assert (found.recorded.facts, found.recorded.stripped, found.recorded.messages) == (
            expected_facts,
            stripped,
            MESSAGES,
        )
        assert (
            isinstance(found.recorded.facts["top_p"], float)
            and found.recorded.facts["stream"] is False
        )
    found = store.exchange("c", 1)
    assert (found.recorded.facts, found.recorded.stripped, found.recorded.messages) == ({}, {}, ())
    found = store.exchange("c", 2)
    assert (found.recorded.facts, found.recorded.stripped, found.recorded.messages) == (
        {"model": "m"},
        {},
        None,
    )

    summaries = store.exchanges("c")
    assert [s.websocket_messages for s in summaries] == [3, 0, None]
    assert [s.facts for s in summaries] == [expected_facts, {}, {"model": "m"}]
    assert [s.drifted for s in summaries] == [0, 0, 0]
    # A transcript is stored like a body, once, and counted with the bodies.
    [(size,)] = run_sql(
        store_url,
        "SELECT size FROM blobs WHERE digest = :name",
        name=blobs.digest(encode(MESSAGES)),
    )
    assert size == len(encode(MESSAGES))
    store.close()

    with open_store(store_url) as reopened:
        found = reopened.lookup("c", "ws", 0)
        assert (
            found is not None
            and found.recorded.messages == MESSAGES
            and found.recorded.facts == expected_facts
        )
        assert reopened.lookup("c", "plain", 0).recorded.messages is None  # type: ignore[union-attr]
        assert [quiet.key, plain.key, full.key] == ["quiet", "plain", "ws"]
        assert reopened.verify("c").ok


def test_facts_no_column_can_hold_are_stored_as_unknown(store: Store) -> None:
    record(
        store,
        facts={
            "seed": 2**64,
            "max_tokens": -(2**63) - 1,
            "temperature": float("nan"),
            "top_p": 10**400,
        },
    )
    store.flush(WAIT)
    assert store.exchange("c", 0).recorded.facts == {}


@pytest.mark.parametrize(
    ("facts", "problem"),
    [
        ({"modle": "gpt-4o"}, "unknown fact 'modle'"),
        ({"seed": "42"}, "fact 'seed' must be an int"),
        ({"seed": True}, "fact 'seed' must be an int"),
        ({"temperature": "hot"}, "fact 'temperature' must be a number"),
        ({"stream": 1}, "fact 'stream' must be a bool"),
        ({"usage": {"total": 1.5}}, "fact 'usage' must be a mapping of str to int"),
        ({"rate_limits": {"retry-after": 1}}, "fact 'rate_limits' must be a mapping of str to str"),
        ({"model": 4}, "fact 'model' must be a str"),
    ],
)
def test_a_fact_that_is_not_one_is_refused_at_submit(
    store: Store, facts: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        record(store, facts=facts)
    assert store.count("c", "k") == 0
    assert not store.has_cassette("c")
    assert set(FACT_NAMES) == {name for name in FACTS}


def test_messages_are_chained_and_derived_columns_are_not(store: Store, store_url: str) -> None:
    record(store, key="a")
    record(store, key="ws", messages=MESSAGES)
    record(store, key="b")
    store.flush(WAIT)
    # Facts, run ids and stripped digests are derived or observed: editing them is no break.
    run_sql(
        store_url,
        "UPDATE exchanges SET model = 'other', run_id = 'other', stripped = '{}', "
        "message_count = 7, usage = :usage",
        usage='{"x": 1}',
    )
    assert store.verify("c").ok

    run_sql(store_url, "UPDATE exchanges SET messages_digest = NULL WHERE seq = 1")
    report = store.verify("c")
    assert (report.ok, report.first_break) == (False, 1)


def test_a_damaged_transcript_is_reported(store: Store, store_url: str) -> None:
    record(store, key="ws", messages=MESSAGES)
    store.flush(WAIT)
    name = blobs.digest(encode(MESSAGES))
    run_sql(
        store_url,
        "UPDATE blobs SET data = :junk WHERE digest = :name",
        junk=blobs.compress(b"\x01\x00\x00"),
        name=name,
    )
    report = store.verify("c")
    assert (report.ok, report.first_break) == (False, 0)
    assert f"its transcript body {name[:16]} does not match its digest" in report.detail
    with pytest.raises(StoreError, match=rf"transcript {name[:16]} is cut off in message 0, in "):
        store.lookup("c", "ws", 0)


# -- filters -------------------------------------------------------------------------


def test_listings_filter_by_run_model_and_status(store: Store) -> None:
    record(store, key="a", context={"run-id": "r1"}, facts={"model": "gpt-4o"})
    record(store, key="b", context={"run-id": "r2"}, facts={"answered_model": "gpt-4o"}, status=429)
    record(store, key="c", context={}, outcome=Outcome.TRUNCATED, started_at=1_700_000_009.0)
    record(
        store,
        key="d",
        context={"run-id": "r\udc80"},
        facts={"model": "claude"},
        response=None,
        outcome=Outcome.FAILED,
    )
    record(store, cassette="other", key="a", context={"run-id": "r1"}, status=429)
    store.flush(WAIT)

    def seqs(**criteria: Any) -> list[int]:
        return [s.seq for s in store.exchanges("c", ExchangeFilter(**criteria))]

    assert seqs() == [0, 1, 2, 3]
    assert seqs(run_id="r1") == [0]
    assert seqs(run_id="r\udc80") == [3]
    assert seqs(model="gpt-4o") == [0, 1]
    assert seqs(model="claude") == [3]
    assert seqs(status=429) == [1]
    assert seqs(status=200) == [0, 2]
    assert seqs(status="truncated") == [2]
    assert seqs(status=Outcome.COMPLETE) == [0, 1]
    assert seqs(model="gpt-4o", status=429, run_id="r2") == [1]
    assert seqs(model="gpt-4o", run_id="r1", status=429) == []
    assert seqs(run_id="nope") == []
    with pytest.raises(CassetteNotFound):
        store.exchanges("nope", ExchangeFilter(run_id="r1"))
    with pytest.raises(ValueError, match="'truncatd' is no outcome; use one of complete, "):
        ExchangeFilter(status="truncatd")

    every = {s.name: s.exchanges for s in store.cassettes()}
    assert every == {"c": 4, "other": 1}
    listed = store.cassettes(ExchangeFilter(status=429))
    assert [(s.name, s.exchanges) for s in listed] == [("c", 1), ("other", 1)]
    (listed,) = store.cassettes(ExchangeFilter(status="truncated"))
    assert (listed.name, listed.exchanges, listed.first_at, listed.last_at) == (
        "c",
        1,
        1_700_000_009.0,
        1_700_000_009.0,
    )
    assert listed.stored_bytes > 0
    assert store.cassettes(ExchangeFilter(run_id="nope")) == []
    assert store.cassettes(ExchangeFilter()) == store.cassettes()


# -- drift ---------------------------------------------------------------------------


def test_drift_notes_show_in_exchange_and_listing(store: Store) -> None:
    record(store, key="a")
    record(store, key="b")
    store.flush(WAIT)
    before = time.time()
    store.note_drift("c", 1, ["body:$.user", "query:ts"], {"run-id": "r9", "session-id": "s"})
    store.note_drift("c", 1, ("body:$.user",), {})
    store.flush(WAIT)

    drift = store.exchange("c", 1).drift
    assert [(d.paths, d.context) for d in drift] == [
        (("body:$.user", "query:ts"), {"run-id": "r9", "session-id": "s"}),
        (("body:$.user",), {}),
    ]
    assert before <= drift[0].at <= drift[1].at <= time.time()
    assert store.exchange("c", 0).drift == ()
    assert store.lookup("c", "b", 0).drift == ()  # type: ignore[union-attr]
    assert [s.drifted for s in store.exchanges("c")] == [0, 2]
    assert store.verify("c").ok  # drift is noted beside the chain, not in it

    # A note queued right after its exchange is written after it.
    record(store, key="d")
    store.note_drift("c", 2, ["query:ts"], {})
    store.flush(WAIT)
    assert [d.paths for d in store.exchange("c", 2).drift] == [("query:ts",)]


def test_noting_drift_never_waits_and_a_note_on_nothing_is_dropped(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    record(store)
    store.flush(WAIT)
    with writes_blocked(store_url):
        started = time.monotonic()
        store.note_drift("c", 0, ["body:$.x"], {})
        store.note_drift("c", 5, ["body:$.x"], {})
        store.note_drift("nope", 0, ["body:$.x"], {})
        assert time.monotonic() - started < 1.0
    store.flush(WAIT)
    assert len(store.exchange("c", 0).drift) == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "freezeframe.storage"]
    assert any("exchange 5 of cassette 'c'" in m and "not there" in m for m in messages)
    assert any("cassette 'nope'" in m for m in messages)

    store.close()
    with pytest.raises(StoreClosed):
        store.note_drift("c", 0, ["body:$.x"], {})


@pytest.mark.postgres
def test_drift_is_noted_after_the_server_dropped_the_writers_connection(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="freezeframe.storage")
    with open_store(postgres_url) as store:
        record(store)
        store.flush(WAIT)
        terminate_freezeframe_backends(postgres_url)
        store.note_drift("c", 0, ["body:$.x"], {})
        store.flush(WAIT)
        assert len(store.exchange("c", 0).drift) == 1
    assert not [r for r in caplog.records if "dropping" in r.getMessage()]


def test_a_long_run_is_listed_a_page_at_a_time_and_counted_in_the_store(store: Store) -> None:
    for n in range(7):
        record(
            store,
            key=f"k{n}",
            host="api.openai.com" if n % 2 else "tools.example",
            outcome=Outcome.TRUNCATED if n == 3 else Outcome.COMPLETE,
            started_at=1_700_000_000.0 + n,
            duration=0.5,
        )
    store.flush(WAIT)
    assert [s.seq for s in store.exchanges("c", offset=2, limit=3)] == [2, 3, 4]
    assert [s.seq for s in store.exchanges("c", offset=6, limit=3)] == [6]
    on_openai = ExchangeFilter(host="api.openai.com")
    assert [s.seq for s in store.exchanges("c", on_openai, offset=1, limit=2)] == [3, 5]
    assert store.exchanges("c")[1].first_byte_after is not None

    overview = store.overview("c")
    assert overview.exchanges == 7
    assert overview.by_outcome == {"complete": 6, "truncated": 1}
    assert overview.hosts == ("api.openai.com", "tools.example")
    assert (overview.first_at, overview.last_end) == (1_700_000_000.0, 1_700_000_006.5)
    assert (overview.drifted, overview.by_origin) == (0, {})
    assert store.overview("c", on_openai).exchanges == 3
    with pytest.raises(CassetteNotFound):
        store.overview("nope")
