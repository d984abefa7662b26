"""Conversations stored about once: bodies stored against a base, read back byte-exact.

An agent's requests repeat the whole conversation so far; these tests record such
conversations through the real store (SQLite and PostgreSQL) and check what a user would
notice: the store grows by about what each turn adds, every body comes back exactly as
sent from a store opened afresh, verify covers bodies stored against a base, and removing
or collecting one cassette never takes a base another still needs.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.agent_traffic import Conversation
from support.database import run_sql
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import Store, blobs, open_store
from freezeframe.storage.deltas import LINE_LENGTH, Lines


def record(store: Store, cassette: str, bodies: list[bytes], *, path: str = "/v1/chat") -> None:
    for n, body in enumerate(bodies):
        key = f"{cassette}-{path}-{n}"
        store.submit(
            plausible_exchange(
                store.reserve(cassette, key),
                cassette=cassette,
                key=key,
                path=path,
                request_body=body,
                canonical=b"form " + body,
                response=plausible_response(body=f"answer {n}".encode()),
            )
        )
    store.flush(30)


def stored_bytes(url: str) -> int:
    return int(run_sql(url, "SELECT SUM(stored_size) FROM blobs")[0][0])


def test_a_growing_conversation_costs_about_what_each_turn_adds(
    store: Store, store_url: str
) -> None:
    bodies = Conversation(seed=1).turns(60)
    record(store, "chat", bodies)

    whole = sum(len(blobs.compress(body)) for body in bodies)
    # Each turn is stored twice (the body and its canonical form), so "about once" is
    # about twice the last, longest body compressed on its own.
    once = 2 * len(blobs.compress(bodies[-1]))
    on_disk = stored_bytes(store_url)
    assert on_disk < 3 * once, f"{on_disk} bytes stored for {once} worth of conversation"
    assert on_disk * 5 < 2 * whole, "deltas should save most of what whole bodies cost"
    depths = [row[0] for row in run_sql(store_url, "SELECT depth FROM blobs")]
    assert max(depths) <= blobs.MAX_DEPTH
    assert max(depths) >= 2, "turns are stored against earlier turns"


def test_every_turn_reads_back_byte_exact_from_a_store_opened_afresh(
    store: Store, store_url: str
) -> None:
    bodies = Conversation(seed=2).turns(40)
    record(store, "chat", bodies)
    store.close()

    with open_store(store_url) as reopened:
        for seq in reversed(range(len(bodies))):
            exchange = reopened.exchange("chat", seq)
            assert exchange.recorded.request_body == bodies[seq]
            assert exchange.recorded.canonical == b"form " + bodies[seq]
        assert reopened.verify("chat").ok


def test_verify_names_a_body_whose_base_was_changed_in_place(store: Store, store_url: str) -> None:
    bodies = Conversation(seed=3).turns(8)
    record(store, "chat", bodies)
    base = run_sql(store_url, "SELECT base FROM blobs WHERE base IS NOT NULL LIMIT 1")[0][0]
    run_sql(
        store_url,
        "UPDATE blobs SET data = :data WHERE digest = :digest",
        data=blobs.compress(b"something else entirely"),
        digest=base,
    )
    store.close()

    with open_store(store_url) as reopened:
        report = reopened.verify("chat")
    assert not report.ok
    assert "does not match its digest" in report.detail


def test_removing_a_cassette_keeps_the_bases_another_cassette_still_reads_through(
    store: Store, store_url: str
) -> None:
    bodies = Conversation(seed=4).turns(12)
    record(store, "first", bodies)
    # The same requests again elsewhere: the store already has each body, stored against
    # bases that "first" named.
    record(store, "second", bodies[6:])

    store.remove("first")
    store.close()
    with open_store(store_url) as reopened:
        for seq, body in enumerate(bodies[6:]):
            assert reopened.exchange("second", seq).recorded.request_body == body
        assert reopened.verify("second").ok
        reopened.collect(grace=0, dry_run=False)
        assert reopened.exchange("second", 5).recorded.request_body == bodies[-1]
        assert reopened.verify("second").ok


def test_a_cassette_removed_with_its_bases_leaves_no_body_behind(
    store: Store, store_url: str
) -> None:
    record(store, "chat", Conversation(seed=5).turns(20))
    store.remove("chat")
    assert run_sql(store_url, "SELECT COUNT(*) FROM blobs") == [(0,)]


def test_interleaved_conversations_each_follow_their_own_line(store: Store, store_url: str) -> None:
    agents = [Conversation(seed=10 + n) for n in range(3)]
    interleaved = []
    for _ in range(20):
        for agent in agents:
            interleaved.append(agent.request())
            agent.answer()
    record(store, "team", interleaved)

    whole = sum(len(blobs.compress(body)) for body in interleaved)
    assert stored_bytes(store_url) * 4 < 2 * whole
    for seq, body in enumerate(interleaved):
        assert store.exchange("team", seq).recorded.request_body == body


def test_a_base_deleted_behind_the_writers_back_costs_only_the_saving(
    store: Store, store_url: str
) -> None:
    """The writer remembers what it stored; when a base has gone since (removed by another
    process), the next body is stored on its own instead of against nothing."""
    bodies = Conversation(seed=6).turns(3)
    record(store, "gone", bodies[:1])
    run_sql(store_url, "DELETE FROM exchanges", "DELETE FROM blobs")
    record(store, "gone", bodies[1:])
    for seq, body in enumerate(bodies[1:], start=1):
        assert store.exchange("gone", seq).recorded.request_body == body


def test_skip_delta_bases_in_base_4_keep_every_chain_short() -> None:
    lines = Lines()
    bodies = Conversation(seed=7).turns(LINE_LENGTH + 20)
    index_of = {}
    depth: dict[str, int] = {}
    for index, body in enumerate(bodies):
        name = blobs.digest(body)
        base = lines.base_for("group", name, body)
        index_of[name] = index
        depth[name] = 0 if base is None else depth[base.name] + 1
        if 0 < index < LINE_LENGTH:
            step = 4 ** next(v for v in range(5) if index % 4 ** (v + 1))
            assert base is not None and index_of[base.name] == index - step
    assert max(depth.values()) <= 13 < blobs.MAX_DEPTH


def test_a_body_planned_again_gets_the_same_base() -> None:
    """A batch written again after a failure stores each body as it was planned."""
    lines = Lines()
    bodies = Conversation(seed=11).turns(6)
    planned = [lines.base_for("group", blobs.digest(body), body) for body in bodies]
    assert lines.base_for("group", blobs.digest(bodies[5]), bodies[5]) == planned[5]
    assert planned[5] is not None and planned[5].name == blobs.digest(bodies[4])


def test_an_unrelated_body_starts_a_line_against_the_first_one() -> None:
    lines = Lines()
    first = Conversation(seed=8).turns(3)
    other = Conversation(seed=9).turns(1)[0]
    for body in first:
        lines.base_for("group", blobs.digest(body), body)
    base = lines.base_for("group", blobs.digest(other), other)
    assert base is not None and base.name == blobs.digest(first[0])


def test_the_budget_bounds_what_the_writer_holds() -> None:
    lines = Lines(budget=200_000)
    for seed in range(40):
        body = Conversation(seed=seed).turns(1)[0]
        lines.base_for(("endpoint", seed), blobs.digest(body), body)
    assert lines.base_for(("endpoint", 0), "x", b"y") is None, "the oldest group was dropped"


@settings(max_examples=25)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.binary(min_size=1, max_size=300)), min_size=1, max_size=30
    ),
    st.randoms(use_true_random=False),
)
def test_any_bodies_come_back_exact_whatever_bases_they_get(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, bytes]],
    rng: random.Random,
) -> None:
    """Bodies that grow, shrink, repeat and interleave in any way: each reads back as sent
    and verify passes, after the store is closed and opened again."""
    url = f"sqlite:///{tmp_path_factory.mktemp('deltas')}/freezeframe.db"
    conversations: list[bytes] = [b"", b"", b""]
    bodies = []
    for which, piece in steps:
        grown = conversations[which] + piece
        conversations[which] = grown if rng.random() < 0.8 else piece
        bodies.append(conversations[which])
    with open_store(url) as store:
        record(store, "any", bodies)
    with open_store(url) as store:
        assert [
            store.exchange("any", n).recorded.request_body for n in range(len(bodies))
        ] == bodies
        assert store.verify("any").ok
