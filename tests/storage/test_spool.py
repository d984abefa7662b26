"""The blob writer on its own: how a stream is cut into parts, and its end states."""

import errno
from typing import IO

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.storage import blobs
from freezeframe.storage.errors import StoreClosed, StoreError
from freezeframe.storage.records import BlobRef
from freezeframe.storage.spool import SpooledBlob, SpoolWriter


class Handed:
    """Stands in for the store's writer queue: keeps what is handed over."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.blobs: list[SpooledBlob] = []
        self.refuse = refuse

    def __call__(self, blob: SpooledBlob) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.blobs.append(blob)


def parts_of(blob: SpooledBlob) -> list[bytes]:
    try:
        return [blobs.decompress_part(part) for part in blob.parts()]
    finally:
        blob.discard()


@given(
    writes=st.lists(st.binary(max_size=300), max_size=12),
    part_size=st.sampled_from([1, 7, 64, 256]),
)
def test_a_stream_is_cut_into_full_parts_and_a_nonempty_last_one(
    writes: list[bytes], part_size: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blobs, "PART_SIZE", part_size)
        handed = Handed()
        writer = SpoolWriter(handed, "test-store")
        for data in writes:
            writer.write(data)
        ref = writer.finish()
        body = b"".join(writes)
        assert ref == BlobRef(blobs.digest(body), len(body))
        if not body:
            assert handed.blobs == []
            return
        [blob] = handed.blobs
        parts = parts_of(blob)
        assert b"".join(parts) == body
        assert [len(part) for part in parts[:-1]] == [part_size] * (len(parts) - 1)
        assert 0 < len(parts[-1]) <= part_size
        assert blob.count == len(parts) == -(-len(body) // part_size)


def test_a_body_of_one_part_never_touches_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_disk(*args: object, **kwargs: object) -> IO[bytes]:
        raise AssertionError("spooled to disk")

    monkeypatch.setattr("tempfile.TemporaryFile", no_disk)
    handed = Handed()
    writer = SpoolWriter(handed, "test-store")
    writer.write(b"x" * blobs.PART_SIZE)  # exactly one part
    writer.finish()
    [blob] = handed.blobs
    [part] = list(blob.parts())
    # The one part is an ordinary compressed body, so it is stored like one.
    assert blobs.decompress(part) == b"x" * blobs.PART_SIZE


def test_a_store_that_refuses_the_body_closes_the_writer() -> None:
    writer = SpoolWriter(Handed(refuse=StoreClosed("test-store")), "test-store")
    writer.write(b"x" * (blobs.PART_SIZE + 1))
    with pytest.raises(StoreClosed):
        writer.finish()
    with pytest.raises(StoreClosed):
        writer.finish()
    writer.abort()  # nothing left to abort


def test_a_spool_that_cannot_be_written_aborts(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object, **kwargs: object) -> IO[bytes]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tempfile.TemporaryFile", full)
    writer = SpoolWriter(Handed(), "test-store")
    writer.write(b"x" * blobs.PART_SIZE)
    with pytest.raises(StoreError, match="cannot spool a body to a temporary file: No space"):
        writer.write(b"x")
    with pytest.raises(StoreError, match="aborted"):
        writer.finish()
