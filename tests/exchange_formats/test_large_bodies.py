"""A body far larger than the store loads at once passes through export and import in parts:
memory grows by much less than the body, and the body comes back byte-exact."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from support.exchanges import plausible_exchange, plausible_response
from support.memory import peak_rss

from freezeframe.exchange_formats import Keeper, export_cassette, open_import
from freezeframe.storage import open_store

BODY_SIZE = 96 * 1024 * 1024
GROWTH_LIMIT = 48 * 1024 * 1024
"""Half the body: what one part, its compressed copy and the interpreter's churn may take."""


def no_keeper(cassette: str) -> Keeper:
    raise AssertionError("an export needs no keying")


@pytest.mark.parametrize("format_", ["bundle", "jsonl"])
def test_a_large_body_exports_and_imports_back_in_parts(format_: str, tmp_path: Path) -> None:
    seed = hashlib.sha256(b"seed").digest()
    with open_store(f"sqlite:///{tmp_path}/data/freezeframe.db") as store:
        writer = store.blob_writer()
        digest = hashlib.sha256()
        block = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(256)) * 128
        for index in range(BODY_SIZE // len(block)):
            piece = bytes([index % 251]) + block[1:]
            digest.update(piece)
            writer.write(piece)
        ref = writer.finish()
        store.submit(
            plausible_exchange(
                store.reserve("big", "k"),
                cassette="big",
                response=plausible_response(body=b"", body_ref=ref),
            )
        )
        store.flush(60)

        exported_file = tmp_path / f"big.{format_}"
        with peak_rss(os.getpid()) as exported:
            export_cassette(store, "big", exported_file, format_)
        with peak_rss(os.getpid()) as imported:
            opened = open_import(exported_file, "big-copy", no_keeper)
            store.import_cassette(opened.cassette, opened.exchanges)

        answer = store.exchange("big-copy", 0).recorded.response
        assert answer is not None and answer.body_ref == ref
        copied = hashlib.sha256()
        for part in store.read_blob(ref):
            copied.update(part)
        assert copied.digest() == digest.digest()
    assert exported[1] - exported[0] < GROWTH_LIMIT
    assert imported[1] - imported[0] < GROWTH_LIMIT
