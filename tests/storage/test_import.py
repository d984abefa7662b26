"""Store.import_cassette: a cassette written whole in one transaction, or not at all."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import (
    BlobRef,
    Drift,
    ForkOrigin,
    Imported,
    Note,
    Slot,
    Store,
    StoreError,
    blobs,
)
from freezeframe.storage.blobs import digest


def items(cassette: str, count: int) -> Iterator[Imported]:
    for n in range(count):
        exchange = plausible_exchange(
            Slot(n, n),
            cassette=cassette,
            key="k",
            response=plausible_response(body=f"answer {n % 3}".encode()),
        )
        note = Drift(at=1.5, paths=("body:$.user",), context={"run-id": "r"})
        yield Imported(exchange, drift=(note,) if n == 1 else ())


def test_an_import_keeps_slots_bodies_and_drift_and_chains_afresh(store: Store) -> None:
    imported = store.import_cassette("copy", items("copy", 5))

    assert (imported.cassette, imported.exchanges) == ("copy", 5)
    listed = store.exchanges("copy")
    assert [(s.seq, s.occurrence) for s in listed] == [(n, n) for n in range(5)]
    assert store.exchange("copy", 4).recorded.response.body == b"answer 1"  # type: ignore[union-attr]
    assert [d.paths for d in store.exchange("copy", 1).drift] == [("body:$.user",)]
    report = store.verify("copy")
    assert report.ok and report.head == imported.head
    assert [hit.seq for hit in store.search("answer 2", cassette="copy")] == [2]


def test_an_imports_case_notes_are_written_in_its_transaction(store: Store) -> None:
    notes = [Note("noted", None, 10.0, "TICKET-9: seen twice"), Note("noted", 2, 11.0, "here")]
    store.import_cassette("noted", items("noted", 3), notes=notes)
    assert store.notes("noted") == notes


def test_a_case_note_on_no_imported_exchange_refuses_the_whole_import(store: Store) -> None:
    stray = Note("stray", 7, 10.0, "on an exchange the file does not hold")
    with pytest.raises(StoreError, match="exchange 7 of 'stray'"):
        store.import_cassette(
            "stray", items("stray", 3), notes=[Note("stray", None, 9.0, "ok"), stray]
        )
    assert not store.has_cassette("stray")
    assert store.notes("stray") == []


def test_an_import_that_fails_half_way_leaves_nothing_and_recording_goes_on(
    store: Store,
) -> None:
    def failing() -> Iterator[Imported]:
        yield from items("half", 100)
        raise ValueError("line 101: not JSON")

    with pytest.raises(ValueError, match="line 101"):
        store.import_cassette("half", failing())

    assert "half" not in store.cassette_names()
    assert not store.has_cassette("half")
    store.submit(plausible_exchange(store.reserve("live", "k"), cassette="live"))
    store.flush(10)
    assert len(store.exchanges("live")) == 1


def test_a_slot_taken_twice_in_the_file_is_refused_as_a_store_error(store: Store) -> None:
    twice = [*items("twice", 2), *items("twice", 1)]
    with pytest.raises(StoreError, match="cannot import cassette 'twice'"):
        store.import_cassette("twice", twice)
    assert "twice" not in store.cassette_names()


def test_an_existing_cassette_is_not_imported_into(store: Store) -> None:
    store.import_cassette("taken", items("taken", 1))
    with pytest.raises(StoreError, match="already exists.*--as NAME"):
        store.import_cassette("taken", items("taken", 2))
    assert len(store.exchanges("taken")) == 1


def test_a_large_body_streams_in_and_one_that_lies_about_its_digest_fails(
    store: Store,
) -> None:
    body = bytes(range(256)) * (blobs.PART_SIZE // 256 * 3 + 7)
    ref = BlobRef(digest(body), len(body))

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), 100_000):
            yield body[start : start + 100_000]

    exchange = plausible_exchange(
        Slot(0, 0), cassette="big", response=plausible_response(body=b"", body_ref=ref)
    )
    store.import_cassette("big", [Imported(exchange, streams=((ref, pieces),))])
    assert b"".join(store.read_blob(ref)) == body
    assert store.verify("big").ok

    lying = BlobRef("0" * 64, len(body))
    liar = dataclasses.replace(
        exchange, cassette="liar", response=plausible_response(body=b"", body_ref=lying)
    )
    with pytest.raises(StoreError, match="does not match what was read"):
        store.import_cassette("liar", [Imported(liar, streams=((lying, pieces),))])
    assert "liar" not in store.cassette_names()


def test_a_fork_imported_with_its_origin_chains_from_it_and_says_so(store: Store) -> None:
    store.import_cassette("source", items("source", 3))
    store.fork("source", "fork", upto=1)
    origin = store.fork_origin("fork")
    assert origin == ForkOrigin("source", 1, store.verify("source").head)
    assert store.fork_origin("source") is None

    moved = [
        Imported(
            plausible_exchange(
                Slot(n, n),
                cassette="moved",
                key="k",
                response=plausible_response(body=f"answer {n % 3}".encode()),
                origin=store.exchange("fork", n).recorded.origin,
            )
        )
        for n in range(2)
    ]
    imported = store.import_cassette("moved", moved, origin=origin)
    report = store.verify("moved")
    assert report.ok and report.head == imported.head
    assert report.provenance[0].startswith("forked from 'source' (exchanges up to #1;")
    assert store.fork_origin("moved") == origin
