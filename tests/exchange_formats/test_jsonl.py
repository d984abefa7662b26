"""Reading jsonl exports back: what is refused, and where the refusal points."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.exchange_formats import FormatError, Keeper, export_cassette, open_import
from freezeframe.storage import Edit, Imported, Slot, Store, open_store

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "exchange_formats" / "schema" / "jsonl.schema.json").read_text()
)


def no_keeper(cassette: str) -> Keeper:
    raise AssertionError("a jsonl file needs no keying")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path}/data/ff.db") as opened:
        for _ in range(3):
            opened.submit(plausible_exchange(opened.reserve("c", "k"), cassette="c"))
        opened.flush(10)
        yield opened


@pytest.fixture
def exported(store: Store, tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    export_cassette(store, "c", path, "jsonl")
    return path


def import_(store: Store, path: Path, name: str) -> None:
    opened = open_import(path, name, no_keeper)
    store.import_cassette(opened.cassette, opened.exchanges, origin=opened.origin)


def test_a_newer_format_version_asks_for_an_upgrade(store: Store, exported: Path) -> None:
    lines = exported.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"format_version":1', b'"format_version":2')
    exported.write_bytes(b"".join(lines))
    with pytest.raises(FormatError) as refused:
        import_(store, exported, "newer")
    assert str(refused.value) == (
        f"{exported}: line 1: format version 2 is newer than this freezeframe reads (1): "
        "upgrade freezeframe"
    )


def test_a_file_cut_off_mid_line_imports_nothing(store: Store, exported: Path) -> None:
    exported.write_bytes(exported.read_bytes()[:-40])
    with pytest.raises(FormatError, match=r": line 4: the line is cut off"):
        import_(store, exported, "cut")
    assert "cut" not in store.cassette_names()


def test_a_fact_of_the_wrong_kind_is_named_where_it_is(store: Store, exported: Path) -> None:
    lines = exported.read_bytes().splitlines(keepends=True)
    document = json.loads(lines[2])
    document["metadata"] = {"max_tokens": "many"}
    lines[2] = json.dumps(document).encode() + b"\n"
    exported.write_bytes(b"".join(lines))
    with pytest.raises(FormatError, match=r": line 3: \$\.metadata: fact 'max_tokens' must be"):
        import_(store, exported, "facts")


def test_ctrl_c_during_an_import_rolls_it_back(store: Store) -> None:
    def slow() -> Iterator[Imported]:
        for n in range(200):
            if n == 5:
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            yield Imported(plausible_exchange(Slot(n, n), cassette="stopped"))

    # The collector off: a finalizer of an earlier test's garbage, run by a collection while
    # this thread waits, would take the KeyboardInterrupt and lose it ("Exception ignored in").
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(KeyboardInterrupt):
            store.import_cassette("stopped", slow())
    finally:
        gc.enable()
    assert "stopped" not in store.cassette_names()
    store.submit(plausible_exchange(store.reserve("after", "k"), cassette="after"))
    store.flush(10)
    assert len(store.exchanges("after")) == 1


@pytest.mark.parametrize("format_", ["jsonl", "bundle"])
def test_an_edited_fork_keeps_its_provenance_and_drift_through_an_export(
    store: Store, tmp_path: Path, format_: str
) -> None:
    answer = plausible_response(body=b'{"edited": true}')
    store.fork("c", "what-if", edits={1: Edit(answer, {}, ("response body replaced",))})
    store.note_drift("what-if", 2, ["body:$.user"], {"run-id": "r2"})
    store.flush(10)
    path = tmp_path / f"what-if.{format_}"
    export_cassette(store, "what-if", path, format_)
    if format_ == "jsonl":
        header = json.loads(path.read_bytes().splitlines()[0])
        jsonschema.validate(header, SCHEMA)
        assert header["origin"]["cassette"] == "c"
    head = store.verify("c").head
    store.remove("c")
    import_(store, path, "what-if-copy")

    for seq in range(3):
        original = store.exchange("what-if", seq)
        copy = store.exchange("what-if-copy", seq)
        same = dataclasses.replace(copy.recorded, cassette="what-if")
        assert dataclasses.replace(copy, recorded=same, chain=original.chain) == original
    edited = store.exchange("what-if-copy", 1).recorded.origin
    assert edited is not None and (edited.kind, edited.cassette, edited.seq) == ("edited", "c", 1)
    assert edited.changes == ("response body replaced",)
    report = store.verify("what-if-copy")
    assert report.ok, report.detail
    assert report.provenance == (
        f"forked from 'c' (every exchange; its chain then ended at {head})",
        "'c' is not in this store: the fork's own chain is the record",
    )
