"""Forks and edited forks: the source untouched, the copy proving where it came from."""

from __future__ import annotations

import dataclasses

import pytest
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import CassetteNotFound, Edit, Message, Outcome, Store, StoreError


def record(store: Store, cassette: str, *answers: bytes) -> None:
    for n, answer in enumerate(answers):
        key = f"key-{n % 2}"  # two keys, so occurrences matter
        store.submit(
            plausible_exchange(
                store.reserve(cassette, key),
                cassette=cassette,
                key=key,
                response=plausible_response(body=answer),
            )
        )
    store.flush(10)


def test_a_fork_copies_up_to_a_seq_shares_bodies_and_proves_its_source(
    store: Store, store_url: str
) -> None:
    record(store, "bug", b"zero", b"one", b"two", b"three")
    blobs_before = run_sql(store_url, "SELECT count(*) FROM blobs")
    source_report = store.verify("bug")

    forked = store.fork("bug", "bug-fix1", upto=2)

    assert (forked.exchanges, forked.upto) == (3, 2)
    copies = store.exchanges("bug-fix1")
    assert [(c.seq, c.occurrence, c.key, c.origin) for c in copies] == [
        (0, 0, "key-0", "forked"),
        (1, 0, "key-1", "forked"),
        (2, 1, "key-0", "forked"),
    ]
    looked_up = store.lookup("bug-fix1", "key-0", 1)
    assert looked_up is not None and looked_up.recorded.response is not None
    assert looked_up.recorded.response.body == b"two"
    assert looked_up.recorded.origin is not None
    assert (looked_up.recorded.origin.cassette, looked_up.recorded.origin.seq) == ("bug", 2)
    assert run_sql(store_url, "SELECT count(*) FROM blobs") == blobs_before, "bodies shared"
    report = store.verify("bug-fix1")
    assert report.ok and report.head == forked.head
    assert report.provenance == (
        f"forked from 'bug' (exchanges up to #2; its chain then ended at {source_report.head})",
        "'bug' still holds all 3 exchanges as they were forked",
    )
    assert store.verify("bug") == source_report, "the source did not change"


def test_a_forks_origin_cannot_be_changed_without_breaking_its_chain(
    store: Store, store_url: str
) -> None:
    record(store, "bug", b"zero", b"one")
    store.fork("bug", "copy")
    run_sql(
        store_url,
        "UPDATE cassettes SET origin = replace(origin, '\"bug\"', '\"other\"') WHERE name = 'copy'",
    )
    report = store.verify("copy")
    assert not report.ok and report.first_break == 0


def test_verify_says_when_the_source_no_longer_holds_what_was_forked(
    store: Store, store_url: str
) -> None:
    record(store, "bug", b"zero", b"one")
    store.fork("bug", "copy")
    run_sql(store_url, "UPDATE exchanges SET chain = 'x' WHERE seq = 1 AND cassette_id = "
            "(SELECT id FROM cassettes WHERE name = 'bug')")  # fmt: skip
    assert store.verify("copy").provenance[1] == "'bug' no longer holds #1 as it was forked"
    store.remove("bug")
    assert store.verify("copy").provenance[1].startswith("'bug' is not in this store")
    assert store.verify("copy").ok


def test_an_edited_fork_changes_one_answer_and_keeps_the_original_beside_it(
    store: Store,
) -> None:
    record(store, "bug", b'{"orders": [1, 2, 3]}', b"one")
    original = store.exchange("bug", 0)
    new_answer = plausible_response(status=200, body=b'{"orders": [2]}')
    store.fork(
        "bug",
        "bug-edit",
        edits={0: Edit(new_answer, {"finish_reason": "stop"}, ("$.orders: [1,2,3] -> [2]",))},
    )
    edited = store.exchange("bug-edit", 0)
    assert (
        edited.recorded.response is not None and edited.recorded.response.body == b'{"orders": [2]}'
    )
    assert edited.recorded.facts == {"finish_reason": "stop"}
    assert edited.recorded.origin is not None
    assert (edited.recorded.origin.kind, edited.recorded.origin.chain) == ("edited", original.chain)
    assert edited.recorded.origin.changes == ("$.orders: [1,2,3] -> [2]",)
    assert store.exchange("bug", 0).recorded.response == original.recorded.response
    assert [c.origin for c in store.exchanges("bug-edit")] == ["edited", "forked"]
    assert store.verify("bug-edit").ok
    assert sorted(hit.cassette for hit in store.search("2")) == ["bug", "bug-edit"]
    assert [hit.cassette for hit in store.search("3")] == ["bug"], "the edit dropped 3"


def test_a_fork_refuses_an_existing_name_a_missing_source_and_an_edit_it_did_not_copy(
    store: Store,
) -> None:
    record(store, "bug", b"zero", b"one")
    store.fork("bug", "taken")
    with pytest.raises(StoreError, match="cassette 'taken' already exists"):
        store.fork("bug", "taken")
    with pytest.raises(CassetteNotFound):
        store.fork("nope", "new")
    with pytest.raises(StoreError, match="has no exchange 1 to edit"):
        store.fork("bug", "new", upto=0, edits={1: Edit(plausible_response(), {}, ())})
    assert "new" not in store.cassette_names(), "a refused fork leaves nothing behind"


def test_an_edited_websocket_keeps_its_ending_and_carries_its_new_transcript(
    store: Store,
) -> None:
    said = (
        Message(from_client=True, text=True, at=0.1, data=b'{"type": "response.create"}'),
        Message(from_client=False, text=True, at=0.2, data=b'{"delta": "ord_7001"}'),
    )
    store.submit(
        plausible_exchange(
            store.reserve("voice", "ws"),
            cassette="voice",
            key="ws",
            response=plausible_response(status=101, body=b""),
            messages=said,
            outcome=Outcome.TRUNCATED,
            error="closed by server: 4001 session expired",
        )
    )
    store.flush(10)
    fixed = (said[0], dataclasses.replace(said[1], data=b'{"delta": "ord_8821"}'))
    answer = store.exchange("voice", 0).recorded.response
    assert answer is not None
    store.fork("voice", "voice-fix", edits={0: Edit(answer, {}, ("text",), fixed)})

    edited = store.exchange("voice-fix", 0)
    assert edited.recorded.messages == fixed
    assert (edited.recorded.outcome, edited.recorded.error) == (
        Outcome.TRUNCATED,
        "closed by server: 4001 session expired",
    ), "the session ends as it did"
    assert store.exchange("voice", 0).recorded.messages == said, "the source is untouched"
    assert store.verify("voice-fix").ok
    assert [hit.cassette for hit in store.search("ord_8821")] == ["voice-fix"]
    assert [hit.cassette for hit in store.search("ord_7001")] == ["voice"]
