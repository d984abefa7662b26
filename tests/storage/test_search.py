"""Full-text search over recorded exchanges, on SQLite (FTS5) and PostgreSQL (tsvector)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import brotli
import pytest
import zstandard
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import NewExchange, Slot, Store, open_store
from freezeframe.storage.encodings import decode
from freezeframe.storage.search import Conversations, Searchable, searchable
from freezeframe.storage.sql.schema import SCHEMA_VERSION
from freezeframe.storage.sql.search import value_digest
from freezeframe.storage.sql.writer import INDEX_WAIT_S

ROOT = Path(__file__).resolve().parents[2]

KILLED = """
import os, signal, sys
from support.exchanges import plausible_exchange, plausible_response
from freezeframe.storage import open_store
store = open_store(sys.argv[1])
answer = plausible_response(body=sys.argv[2].encode())
exchange = plausible_exchange(store.reserve("killed", "k"), cassette="killed", key="k",
                              response=answer)
assert store.submit_durably(exchange, 30)
os.kill(os.getpid(), signal.SIGKILL)
"""
"""Records one exchange, and is killed as soon as it is committed: before it is indexed."""

TOOL_ANSWER = json.dumps(
    {"orders": [{"id": "ord_8821", "user": "u-17", "total": 129.5}, {"id": "ord_9000"}]}
).encode()
STREAM = (
    b'data: {"id":"c1","model":"gpt-4o-2024-08-06","choices":[{"delta":{"content":"Your or"}}]}\n\n'
    b'data: {"id":"c1","model":"gpt-4o-2024-08-06","choices":[{"delta":{"content":"der ships '
    b'tomorrow"}}]}\n\n'
    b"data: [DONE]\n\n"
)


def record(store: Store, cassette: str, **changes: object) -> NewExchange:
    """One exchange, written: searchable from the moment it is listed."""
    key = f"{cassette}-{len(store.exchanges(cassette)) if store.has_cassette(cassette) else 0}"
    exchange = plausible_exchange(
        store.reserve(cassette, key), cassette=cassette, key=key, **changes
    )
    store.submit(exchange)
    store.flush(10)
    return exchange


def test_a_tool_answer_value_is_found_in_every_run_that_got_it(store: Store) -> None:
    answer = plausible_response(body=TOOL_ANSWER)
    record(store, "run-a", path="/orders?q=17", response=answer, started_at=1_700_000_001.0)
    record(store, "run-b", response=plausible_response(body=b'{"answer": "no orders"}'))
    record(store, "run-c", response=answer, started_at=1_700_000_003.0)

    hits = store.search("ord_8821")
    assert sorted((hit.cassette, hit.seq) for hit in hits) == [("run-a", 0), ("run-c", 0)]
    assert all(hit.parts == ("response",) and hit.match == "ord_8821" for hit in hits)
    assert [hit.cassette for hit in store.search("ORD_8821", cassette="run-c")] == ["run-c"]
    assert store.search("ord_8822") == []
    assert store.search("   ") == []
    assert [hit.cassette for hit in store.search("129.5")] == ["run-c", "run-a"]


def test_a_streamed_answer_is_found_as_the_text_it_reassembles_to(store: Store) -> None:
    record(
        store,
        "stream",
        facts={"answered_model": "gpt-4o-2024-08-06"},
        response=plausible_response(
            headers=((b"content-type", b"text/event-stream"),), body=STREAM
        ),
    )
    assert [hit.seq for hit in store.search("your order ships tomorrow")] == [0]
    by_model = store.search("gpt-4o-2024-08-06")
    assert by_model and set(by_model[0].parts) == {"metadata", "response"}


def test_compressed_bodies_and_request_bodies_and_urls_are_searched(store: Store) -> None:
    record(
        store,
        "gz",
        path="/tools/lookup?customer=cus_42",
        request_body=b'{"question": "where is my parcel"}',
        response=plausible_response(
            headers=((b"content-type", b"application/json"), (b"content-encoding", b"gzip")),
            body=gzip.compress(b'{"status": "lost in transit"}'),
        ),
    )
    assert [hit.parts for hit in store.search("lost in transit")] == [("response",)]
    assert [hit.parts for hit in store.search("where is my parcel")] == [("request",)]
    assert [hit.parts for hit in store.search("cus_42")] == [("metadata",)]


def test_markup_and_odd_text_are_only_ever_data(store: Store) -> None:
    hostile = '{"note": "<script>alert(1)</script> \\u0000 \\ud800 \'; DROP TABLE texts; --"}'
    record(store, "odd", response=plausible_response(body=hostile.encode()))
    found = store.search("DROP TABLE texts")
    assert [hit.cassette for hit in found] == ["odd"]
    assert "<script>" in found[0].match
    assert store.search('"; DROP')


def test_removing_a_cassette_drops_its_values_and_keeps_shared_ones(
    store: Store, store_url: str
) -> None:
    record(store, "gone", response=plausible_response(body=TOOL_ANSWER))
    record(store, "stays", response=plausible_response(body=b'{"id": "ord_8821"}'))
    store.remove("gone")
    assert [hit.cassette for hit in store.search("ord_8821")] == ["stays"]
    assert store.search("ord_9000") == []
    assert_forgotten(store_url, "ord_9000")
    record(store, "back", response=plausible_response(body=TOOL_ANSWER))
    assert [hit.cassette for hit in store.search("ord_9000")] == ["back"]


def assert_forgotten(store_url: str, value: str) -> None:
    """Neither the value nor, on SQLite, its tokens in the contentless FTS5 table are left."""
    assert run_sql(
        store_url, "SELECT count(*) FROM texts WHERE digest = :d", d=value_digest(value)
    ) == [(0,)]
    if store_url.startswith("sqlite"):
        phrase = '"' + value + '"'
        found = "SELECT count(*) FROM texts_fts WHERE texts_fts MATCH :phrase"
        assert run_sql(store_url, found, phrase=phrase) == [(0,)]


def test_a_store_from_before_search_is_indexed_when_opened(store_url: str) -> None:
    with open_store(store_url) as store:
        record(store, "old", response=plausible_response(body=TOOL_ANSWER))
    dialect_drop = (
        ["DROP TABLE texts_fts"] if store_url.startswith("sqlite") else []
    )  # what version 4 did not have
    run_sql(
        store_url,
        *dialect_drop,
        "DROP TABLE text_uses",
        "DROP TABLE texts",
        "DROP TABLE misses",
        "UPDATE meta SET value = '4' WHERE name = 'schema_version'",
    )
    with open_store(store_url) as store:
        assert [hit.cassette for hit in store.search("ord_9000")] == ["old"]
        assert store.verify("old").ok


def test_values_are_bounded_and_deduplicated() -> None:
    body = json.dumps({"a": ["same"] * 50, "b": "x" * 200_000, "c": [True, None, 7]}).encode()
    exchange = plausible_exchange(Slot(0, 0), response=plausible_response(body=body))
    values = [(v.part, v.text) for v in searchable(exchange) if v.part == "response"]
    assert values.count(("response", "same")) == 1
    assert ("response", "7") in values
    assert max(len(text) for _, text in values) == 64 * 1024


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd", "deflate"])
def test_a_compressed_bomb_is_not_indexed(coding: str) -> None:
    bomb = b"\0" * (80 * 1024 * 1024)
    packed = {
        "gzip": gzip.compress,
        "br": brotli.compress,
        "zstd": zstandard.ZstdCompressor().compress,
        "deflate": zlib.compress,
    }[coding](bomb)
    assert len(packed) < 1024 * 1024
    assert not decode(packed, (coding,)).whole
    assert decode(packed, (coding,), limit=len(bomb)).data == bomb


def test_a_conversation_is_found_where_each_message_entered_it(store: Store) -> None:
    """Every request of a conversation repeats its history: a message is listed at the
    request that first carried it, in each cassette, and a tool's answer at every answer."""
    history: list[dict[str, str]] = [{"role": "user", "content": "where is order ord_8821"}]
    for turn in range(4):
        body = json.dumps({"model": "gpt-4o", "messages": history}).encode()
        record(store, "chat", request_body=body, response=plausible_response(body=TOOL_ANSWER))
        history = [*history, {"role": "tool", "content": f"turn {turn} said ships tomorrow"}]
    record(store, "other", request_body=body)

    asked = store.search("where is order")
    assert sorted((hit.cassette, hit.seq, hit.parts) for hit in asked) == [
        ("chat", 0, ("request",)),
        ("other", 0, ("request",)),
    ]
    assert [(hit.seq, hit.parts) for hit in store.search("turn 1 said", cassette="chat")] == [
        (2, ("request",))
    ]
    assert sorted(hit.seq for hit in store.search("ord_8821", cassette="chat")) == [0, 1, 2, 3]


def chat(history: list[dict[str, str]]) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": history, "temperature": 0.2}).encode()


def questions(turns: int) -> list[bytes]:
    """A conversation's requests: each repeats the ones before and asks one more question."""
    history = [{"role": "system", "content": "you track orders"}]
    bodies = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn} about ord_{1000 + turn}"})
        bodies.append(chat(history))
        history.append({"role": "assistant", "content": f"answer {turn}"})
    return bodies


def test_forty_turns_in_each_message_is_found_where_it_entered_or_changed(store: Store) -> None:
    """The writer reads each request against its conversation's last one and indexes only
    what it adds (#30); what search finds is what it found when every request was read
    whole: the first turn's question at the first request, a later one where it was asked,
    a message the agent rewrote in place where it was rewritten, and a first-turn value the
    fortieth answer repeats at that answer."""
    bodies = questions(40)
    history = json.loads(bodies[-1])["messages"]
    history[1] = {"role": "user", "content": "question zero was rewritten by the agent"}
    bodies[-1] = chat(history)
    quoted = json.dumps({"choices": [{"message": {"content": "question 0 about ord_1000"}}]})
    for turn, body in enumerate(bodies):
        answer = quoted if turn == 39 else json.dumps({"choices": [{"text": f"answer {turn}"}]})
        record(store, "long", request_body=body, response=plausible_response(body=answer.encode()))

    def found(query: str) -> list[tuple[int, tuple[str, ...]]]:
        return sorted((hit.seq, hit.parts) for hit in store.search(query, cassette="long"))

    assert found("question 0 about") == [(0, ("request",)), (39, ("response",))]
    assert found("question 20 about") == [(20, ("request",))]
    assert found("question 39 about") == [(39, ("request",))]
    assert found("rewritten by the agent") == [(39, ("request",))]
    assert found("answer 38") == [(38, ("response",)), (39, ("request",))]


def test_a_conversation_recorded_again_after_its_cassette_was_removed_is_found_again(
    store: Store,
) -> None:
    """A removed cassette's values are gone: a conversation recorded again under its name
    (which SQLite may give the same row id) is indexed afresh, not read against requests
    the writer remembered of the removed one."""
    bodies = questions(6)
    for body in bodies:
        record(store, "again", request_body=body)
    store.remove("again")
    assert store.search("question 0 about") == []
    for body in bodies[:3]:
        record(store, "again", request_body=body)
    assert [(hit.seq, hit.parts) for hit in store.search("question 0 about")] == [(0, ("request",))]
    assert [hit.seq for hit in store.search("question 2 about")] == [2]


def test_a_fork_recorded_on_finds_its_new_turns_and_its_copied_history(store: Store) -> None:
    bodies = questions(6)
    for body in bodies:
        record(store, "source", request_body=body)
    store.fork("source", "fork", upto=3)
    history = json.loads(bodies[3])["messages"]
    history += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "a new ask"}]
    record(store, "fork", request_body=chat(history))

    assert [(hit.cassette, hit.seq) for hit in store.search("a new ask")] == [("fork", 4)]
    assert ("fork", 1) in {(hit.cassette, hit.seq) for hit in store.search("question 1 about")}
    assert [hit.seq for hit in store.search("question 5 about")] == [5]


def texts(values: Sequence[Searchable]) -> set[str]:
    return {value.text for value in values}


def test_a_writer_reads_a_request_for_what_it_adds_within_its_memory_bound() -> None:
    """What the writer remembers is bounded: a conversation it no longer holds has its
    next request read whole; and a request is remembered only once its values are indexed
    (``remember``), so one never indexed is not taken as listed."""
    bodies = questions(5)

    def asked(turn: int) -> NewExchange:
        return plausible_exchange(Slot(turn, 0), request_body=bodies[turn])

    kept = Conversations(budget=len(bodies[-1]) + len(bodies[-1]) // 2)
    kept.remember(kept.values(asked(0), 1))
    second = kept.values(asked(1), 1)
    assert "question 1 about ord_1001" in texts(second)
    assert not {"question 0 about ord_1000", "you track orders"} & texts(second)
    # Not remembered (its index rolled back, say): the next request is read against turn 0.
    third = kept.values(asked(2), 1)
    assert "question 1 about ord_1001" in texts(third)
    kept.remember(third)
    # Another cassette's conversation fills the budget: this one's is dropped.
    kept.remember(kept.values(asked(4), 2))
    assert "question 0 about ord_1000" in texts(kept.values(asked(3), 1))
    kept.clear()
    assert "question 0 about ord_1000" in texts(kept.values(asked(4), 2))


def test_a_tool_answer_carried_on_as_a_json_string_is_indexed_as_its_values_once(
    store: Store, store_url: str
) -> None:
    """An agent sends a tool's JSON answer back to the model as a string. Indexed whole, that
    string stored every word of the answer a second time (a fifth of PostgreSQL's growth on
    agent traffic, issue #31); its values are the tool answer's own, stored once, and both
    exchanges are still found by them."""
    answer = json.dumps({"order": "ord_8821", "notes": "the parcel left the warehouse at nine"})
    record(store, "agent", method="GET", response=plausible_response(body=answer.encode()))
    call = json.dumps({"order_id": "ord_8821"})
    messages = [
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": call}}]},
        {"role": "tool", "content": answer},
    ]
    body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    record(store, "agent", request_body=body)

    stored = {int(row[0]) for row in run_sql(store_url, "SELECT digest FROM texts")}
    assert value_digest(answer) not in stored
    assert value_digest(call) not in stored
    found = store.search("left the warehouse")
    assert sorted((hit.seq, hit.parts) for hit in found) == [(0, ("response",)), (1, ("request",))]
    assert sorted(hit.seq for hit in store.search("ord_8821")) == [0, 1]


def indexed_uses(store_url: str) -> int:
    return int(run_sql(store_url, "SELECT count(*) FROM text_uses")[0][0])


def test_a_committed_exchange_is_indexed_later_and_at_once_on_flush(
    store: Store, store_url: str
) -> None:
    exchange = plausible_exchange(store.reserve("lazy", "k"), cassette="lazy", key="k")
    assert store.submit_durably(exchange, 30)
    # Committed, listed, and waiting for its index with the writer (INDEX_WAIT_S).
    assert [e.seq for e in store.exchanges("lazy")] == [0]
    assert indexed_uses(store_url) == 0
    store.flush(10)
    assert indexed_uses(store_url) > 0
    assert [hit.cassette for hit in store.search("api.example.com")] == ["lazy"]


def test_a_committed_exchange_is_indexed_without_a_flush(store: Store, store_url: str) -> None:
    exchange = plausible_exchange(store.reserve("lazy", "k"), cassette="lazy", key="k")
    assert store.submit_durably(exchange, 30)
    deadline = time.monotonic() + INDEX_WAIT_S + 20
    while indexed_uses(store_url) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert indexed_uses(store_url) > 0


def test_a_search_indexes_what_waits_first(store: Store) -> None:
    answer = plausible_response(body=TOOL_ANSWER)
    exchange = plausible_exchange(
        store.reserve("now", "k"), cassette="now", key="k", response=answer
    )
    assert store.submit_durably(exchange, 30)
    assert [hit.cassette for hit in store.search("ord_9000")] == ["now"]


def test_a_store_killed_before_indexing_is_caught_up_by_the_next_search(store_url: str) -> None:
    with open_store(store_url):
        pass  # the schema, so that the killed process does not race to create it
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, store_url, '{"order": "ord_4242"}'],
        env=env,
        cwd=ROOT,
        timeout=60,
        capture_output=True,
    )
    assert killed.returncode == -9, killed.stderr.decode()
    assert run_sql(store_url, "SELECT count(*) FROM exchanges") == [(1,)]
    assert indexed_uses(store_url) == 0
    with open_store(store_url) as store:
        # A store opened to read starts no writer, so it leaves the index alone...
        store.flush(10)
        assert [c.name for c in store.cassettes()] == ["killed"]
        assert indexed_uses(store_url) == 0
        # ...and the first search catches it up before it looks.
        assert [hit.cassette for hit in store.search("ord_4242")] == ["killed"]
        assert indexed_uses(store_url) > 0
        assert store.verify("killed").ok


LONG = " ".join(f"word{n}" for n in range(400)) + " the parcel ord_7777 was lost " + "tail " * 300


def test_a_long_value_is_kept_compressed_and_a_match_shows_around_it(
    store: Store, store_url: str
) -> None:
    record(store, "long", response=plausible_response(body=json.dumps({"note": LONG}).encode()))
    [hit] = store.search("parcel ord_7777 was lost")
    assert hit.match.startswith("…") and hit.match.endswith("…")
    assert "the parcel ord_7777 was lost" in hit.match and len(hit.match) < 400
    [(size,)] = run_sql(
        store_url, "SELECT length(data) FROM texts WHERE digest = :d", d=value_digest(LONG.strip())
    )
    assert size < len(LONG) / 3


def test_collecting_forgets_a_value_no_exchange_holds(store: Store, store_url: str) -> None:
    record(store, "kept", response=plausible_response(body=b'{"id": "ord_5150"}'))
    # As a prune cut short leaves it: the value is there, nothing holds it.
    run_sql(
        store_url,
        "DELETE FROM text_uses WHERE text_id = (SELECT id FROM texts WHERE digest = :d)",
        d=value_digest("ord_5150"),
    )
    assert store.collect().values == 1
    assert_forgotten(store_url, "ord_5150")
    assert store.search("ord_5150") == []
    assert [hit.cassette for hit in store.search("api.example.com")] == ["kept"]


_V6_SQLITE = (
    "CREATE TABLE texts (id INTEGER NOT NULL PRIMARY KEY, digest VARCHAR(64) NOT NULL UNIQUE, "
    "body TEXT NOT NULL)",
    "CREATE TABLE text_uses (text_id INTEGER NOT NULL REFERENCES texts (id), "
    "exchange_id INTEGER NOT NULL REFERENCES exchanges (id), part VARCHAR(16) NOT NULL, "
    "PRIMARY KEY (text_id, exchange_id, part))",
    "CREATE VIRTUAL TABLE texts_fts USING fts5(body, content='texts', content_rowid='id', "
    "tokenize='unicode61')",
)
_V6_POSTGRESQL = (
    "CREATE TABLE texts (id SERIAL PRIMARY KEY, digest VARCHAR(64) NOT NULL UNIQUE, "
    "body TEXT NOT NULL, tsv tsvector GENERATED ALWAYS AS "
    "(to_tsvector('simple', left(body, 65536))) STORED)",
    "CREATE INDEX ix_texts_tsv ON texts USING GIN (tsv)",
    "CREATE TABLE text_uses (text_id INTEGER NOT NULL REFERENCES texts (id), "
    "exchange_id INTEGER NOT NULL REFERENCES exchanges (id), part VARCHAR(16) NOT NULL, "
    "PRIMARY KEY (text_id, exchange_id, part))",
)


def test_a_schema_6_store_is_migrated_and_found_by_search(store_url: str) -> None:
    """Version 6 kept values in clear, indexed by an FTS5 table over them (or a generated
    tsvector); opened, the index is built again, compressed, from the exchanges."""
    with open_store(store_url) as store:
        record(store, "old", response=plausible_response(body=TOOL_ANSWER))
        record(store, "old", response=plausible_response(body=json.dumps({"n": LONG}).encode()))
    sqlite = store_url.startswith("sqlite")
    run_sql(
        store_url,
        *(["DROP TABLE texts_fts"] if sqlite else []),
        "DROP TABLE text_uses",
        "DROP TABLE texts",
        *(_V6_SQLITE if sqlite else _V6_POSTGRESQL),
        "INSERT INTO texts (id, digest, body) VALUES (1, 'd1', 'ord_8821 in the old index')",
        "INSERT INTO text_uses SELECT 1, min(id), 'response' FROM exchanges",
        *(["INSERT INTO texts_fts (texts_fts) VALUES ('rebuild')"] if sqlite else []),
        "DELETE FROM meta WHERE name = 'search_indexed'",
        "DROP INDEX ix_exchanges_run_id",
        "UPDATE meta SET value = '6' WHERE name = 'schema_version'",
    )
    assert _search_v6(store_url, "ord_8821") == ["old"]

    with open_store(store_url) as store:
        version = "SELECT value FROM meta WHERE name = 'schema_version'"
        assert run_sql(store_url, version) == [(str(SCHEMA_VERSION),)]
        indexes = (
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            if sqlite
            else "SELECT indexname FROM pg_indexes"
        )
        assert ("ix_exchanges_run_id",) in run_sql(store_url, indexes), "runs are indexed"
        assert [(hit.seq, hit.match) for hit in store.search("ord_9000")] == [(0, "ord_9000")]
        assert store.search("in the old index") == []
        [hit] = store.search("parcel ord_7777 was lost")
        assert hit.seq == 1 and "parcel ord_7777 was lost" in hit.match
        assert store.verify("old").ok
        store.remove("old")
        assert_forgotten(store_url, "ord_9000")
        assert run_sql(store_url, "SELECT count(*) FROM texts") == [(0,)]


def _search_v6(store_url: str, value: str) -> list[str]:
    """The cassettes version 6 found ``value`` in, read as it read them."""
    if store_url.startswith("sqlite"):
        match = "SELECT rowid FROM texts_fts WHERE texts_fts MATCH :q"
    else:
        match = "SELECT id FROM texts WHERE tsv @@ phraseto_tsquery('simple', :q)"
    rows = run_sql(
        store_url,
        "SELECT c.name FROM text_uses u JOIN exchanges e ON e.id = u.exchange_id "
        f"JOIN cassettes c ON c.id = e.cassette_id WHERE u.text_id IN ({match})",
        q=value,
    )
    return [name for (name,) in rows]


def test_a_store_opened_beside_a_running_one_indexes_what_it_has_not_yet(
    store: Store, store_url: str
) -> None:
    answer = plausible_response(body=b'{"order": "ord_3131"}')
    exchange = plausible_exchange(
        store.reserve("beside", "k"), cassette="beside", key="k", response=answer
    )
    assert store.submit_durably(exchange, 30)
    assert indexed_uses(store_url) == 0
    with open_store(store_url) as other:  # freezeframe search, in another shell
        assert [hit.cassette for hit in other.search("ord_3131")] == ["beside"]
    store.flush(10)
    assert [hit.cassette for hit in store.search("ord_3131")] == ["beside"]


def test_bedrock_event_streams_and_gemini_arrays_are_indexed_as_the_text_they_carry() -> None:
    """A ConverseStream's deltas and an InvokeModel stream's base64 chunks are found joined,
    without Bedrock's padding; a Gemini stream sent as one JSON array too (issue 23)."""
    from freezeframe.canonicalize import eventstream

    def event(kind: str, payload: dict[str, object]) -> bytes:
        return eventstream.event(kind, json.dumps({**payload, "p": "QWERTYpadding"}).encode())

    chunk = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Evora"}}
    encoded = base64.b64encode(json.dumps(chunk).encode()).decode()
    converse = b"".join(
        [
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Stream to "}}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Porto"}}),
        ]
    )
    headers = ((b"content-type", b"application/vnd.amazon.eventstream"),)
    values = []
    for body in (converse, event("chunk", {"bytes": encoded})):
        answer = plausible_response(body=body, headers=headers)
        values += [v.text for v in searchable(plausible_exchange(Slot(0, 0), response=answer))]
    assert "Stream to Porto" in values and "Evora" in values
    assert not any("QWERTY" in value for value in values)
    pieces = [{"candidates": [{"content": {"parts": [{"text": t}]}}]} for t in ("Array ", "Aveiro")]
    answer = plausible_response(body=json.dumps(pieces).encode())
    values = [v.text for v in searchable(plausible_exchange(Slot(0, 0), response=answer))]
    assert "Array Aveiro" in values
