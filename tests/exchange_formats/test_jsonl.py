"""Reading jsonl exports back: what is refused, and where the refusal points."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.exchanges import plausible_exchange

from exchange_formats import FormatError, Keeper, export_cassette, open_import
from storage import Imported, Slot, Store, open_store


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
    store.import_cassette(opened.cassette, opened.exchanges)


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

    with pytest.raises(KeyboardInterrupt):
        store.import_cassette("stopped", slow())
    assert "stopped" not in store.cassette_names()
    store.submit(plausible_exchange(store.reserve("after", "k"), cassette="after"))
    store.flush(10)
    assert len(store.exchanges("after")) == 1
