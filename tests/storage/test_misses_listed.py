"""Store.misses lists a miss as soon as it is noted: replay answers the miss at once, and the
writer keeps it a moment later, so the case file and ``show --misses`` read right after the
answer must still find it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from freezeframe.storage import Imported, Miss, Store


def test_a_miss_is_listed_once_noted_while_the_writer_is_busy(store: Store) -> None:
    started, release = threading.Event(), threading.Event()

    def held() -> Iterator[Imported]:
        started.set()
        release.wait(10)  # the writer is inside this import until released
        yield from ()

    importing = threading.Thread(target=store.import_cassette, args=("busy", held()))
    importing.start()
    try:
        assert started.wait(10), "the import never reached the writer"
        store.note_miss(
            Miss(
                cassette="alpha",
                at=1_700_000_000.0,
                kind="freezeframe_replay_miss",
                method="GET",
                url="https://api.example.com/v1/x",
                key="k",
                occurrence=1,
                recorded=0,
                message="no recording",
                context={},
                nearest=(),
            )
        )
        threading.Timer(0.5, release.set).start()
        assert [(m.cassette, m.url) for m in store.misses("alpha")] == [
            ("alpha", "https://api.example.com/v1/x")
        ]
    finally:
        release.set()
        importing.join(10)
