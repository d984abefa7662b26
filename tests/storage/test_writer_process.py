"""The store written by a process of its own (storage.sql.writerprocess), as the proxy opens
it: real child processes, a real SQLite file or PostgreSQL database, nothing stubbed."""

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from support.exchanges import plausible_exchange, plausible_response

from freezeframe.storage import (
    CassetteNotFound,
    ExchangeNotFound,
    Imported,
    Note,
    Slot,
    Store,
    StoreClosed,
    StoreError,
    blobs,
    open_store,
)
from freezeframe.storage.sql.writerprocess import RESTART_DELAY_S

WAIT = 15.0  # seconds; every wait in this file is bounded by it


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with open_store(store_url, writer_process=True) as opened:
        yield opened


def writer_processes() -> list[psutil.Process]:
    """This process's writer processes, live ones."""
    return [
        child
        for child in psutil.Process().children()
        if child.is_running()
        and child.status() != psutil.STATUS_ZOMBIE
        and "writerchild" in " ".join(child.cmdline())
    ]


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def record(store: Store, key: str, **changes: object) -> bool:
    slot = store.reserve("c", key)
    return store.submit_durably(plausible_exchange(slot, key=key, **changes), WAIT)


def test_strict_answers_once_another_connection_reads_it(store: Store, store_url: str) -> None:
    assert record(store, "first")
    # A store opened now (its own connection, its own process's view) has it: committed.
    with open_store(store_url, create=False) as reader:
        assert [e.key for e in reader.exchanges("c")] == ["first"]
    assert store.stats().exchanges == 1
    assert store.stats().queued == 0


def test_writes_happen_in_another_process(store: Store) -> None:
    assert record(store, "k")
    (child,) = writer_processes()
    assert child.pid != os.getpid()


def test_a_streamed_body_crosses_with_its_spool_file(store: Store) -> None:
    writer = store.blob_writer()
    data = os.urandom(blobs.PART_SIZE * 2 + 17)  # spooled to the file, parts past the first
    writer.write(data)
    ref = writer.finish()
    assert record(store, "big", request_body=b"", request_body_ref=ref)
    assert b"".join(store.read_blob(ref)) == data
    assert store.verify("c").ok


def test_close_writes_everything_submitted(store_url: str) -> None:
    store = open_store(store_url, writer_process=True)
    for n in range(300):
        store.submit(plausible_exchange(store.reserve("c", f"k{n}"), key=f"k{n}"))
    store.close()
    eventually(lambda: not writer_processes(), "the writer process to exit")
    with open_store(store_url, create=False) as reader:
        assert len(reader.exchanges("c")) == 300
        assert reader.verify("c").ok
    with pytest.raises(StoreClosed):
        store.submit(plausible_exchange(store.reserve("c", "late"), key="late"))


def test_what_the_writer_logs_is_logged_by_the_proxy(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="freezeframe"):
        store.note_drift("c", 99, ["$.model"], {})
        store.flush(WAIT)
    assert any(
        "cannot note drift on exchange 99" in r.getMessage() and r.levelno == logging.ERROR
        for r in caplog.records
    )


def test_a_killed_writer_is_reported_and_replaced(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    assert record(store, "before")
    (child,) = writer_processes()
    with caplog.at_level(logging.ERROR, logger="freezeframe"):
        child.send_signal(signal.SIGKILL)
        eventually(lambda: store.health() is not None, "/health to report the dead writer")
    assert "writer process exited" in str(store.health())
    assert any("writer process exited" in r.getMessage() for r in caplog.records)
    # A new process takes over, and once it has committed the store is healthy again.
    time.sleep(RESTART_DELAY_S)
    eventually(lambda: record(store, f"after-{time.monotonic()}"), "a recording to commit")
    assert store.health() is None
    assert store.verify("c").ok
    assert store.stats().exchanges >= 2


def test_the_writer_dies_with_the_process_that_started_it(store_url: str, tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from freezeframe.storage import open_store\n"
        f"store = open_store({store_url!r}, writer_process=True)\n"
        "print('open', flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2]
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"open\n"
        eventually(lambda: bool(psutil.Process(parent.pid).children()), "the writer to start")
        (child,) = psutil.Process(parent.pid).children()
        parent.send_signal(signal.SIGKILL)
        parent.wait(WAIT)
        child.wait(WAIT)  # raises psutil.TimeoutExpired if it outlived the proxy
    finally:
        parent.kill()
        parent.wait(WAIT)
        if parent.stdout is not None:
            parent.stdout.close()


def test_every_other_write_is_done_by_the_writer_process(store: Store) -> None:
    assert record(store, "k", response=plausible_response(body=b"shared answer"))
    forked = store.fork("c", "copy")
    assert (forked.cassette, forked.exchanges) == ("copy", 1)
    store.add_note(Note("copy", 0, time.time(), "looks right"))
    assert [n.text for n in store.notes("copy")] == ["looks right"]
    # What a job raises in the writer process is raised here, as the store's own error.
    with pytest.raises(CassetteNotFound) as missing:
        store.fork("nothing", "other")
    assert missing.value.cassette == "nothing"
    with pytest.raises(ExchangeNotFound):
        store.add_note(Note("copy", 7, time.time(), "no such exchange"))
    assert store.remove("c").exchanges == 1
    assert store.remove("copy").exchanges == 1
    # The writer process forgot the bodies the removals deleted: recorded again, stored again.
    assert record(store, "again", response=plausible_response(body=b"shared answer"))
    again = store.exchange("c", 0)
    assert again.recorded.response is not None and again.recorded.response.body == b"shared answer"
    assert store.verify("c").ok
    (child,) = writer_processes()
    assert child.pid != os.getpid()


def test_an_import_crosses_when_what_it_carries_can(store: Store) -> None:
    exchange = plausible_exchange(Slot(0, 0), cassette="brought", key="k")
    imported = store.import_cassette("brought", [Imported(exchange)])
    assert (imported.cassette, imported.exchanges) == ("brought", 1)
    assert store.verify("brought").ok
    read = (Imported(exchange) for _ in range(1))  # a generator: it reads where it runs
    with pytest.raises(StoreError, match="written by a process of its own"):
        store.import_cassette("generated", read)
    assert store.cassette_names() == ["brought"]


def test_a_deferred_writer_starts_with_the_first_write(store_url: str) -> None:
    # A replaying proxy's store: no process until something is written (#30).
    with open_store(store_url, writer_process=True, defer_writer=True) as store:
        assert writer_processes() == []
        assert store.health() is None
        assert record(store, "first")
        assert len(writer_processes()) == 1
        assert store.lookup("c", "first", 0) is not None
    eventually(lambda: not writer_processes(), "the writer process to exit")


def test_a_deferred_writer_that_cannot_start_is_reported_by_health(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.db"
    with open_store(f"sqlite:///{path}", writer_process=True, defer_writer=True) as store:
        path.unlink()  # the process opens the store it was started for, and finds none
        with caplog.at_level(logging.ERROR, logger="freezeframe"):
            assert not record(store, "lost")
            eventually(lambda: store.health() is not None, "/health to report the writer")
        assert "writer process exited" in str(store.health())
        assert any("writer process exited" in r.getMessage() for r in caplog.records)
