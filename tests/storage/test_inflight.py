"""storage.inflight: one body in flight, from its first byte to what the store keeps."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import zlib
from collections.abc import Callable, Iterator

import brotli
import pytest
import zstandard
from support.addon_chain import KEY, TOKEN

from freezeframe.storage import Store
from freezeframe.storage.encodings import HELD_DECODED
from freezeframe.storage.inflight import BLOCK, LARGE_BODY, REACH, Blocks, Body, redacted
from freezeframe.storage.redaction import Redactor

REDACTOR = Redactor(KEY)
SECRET = TOKEN.encode()
GZIP = ((b"content-encoding", b"gzip"), (b"content-length", b"1"))


def cut(data: bytes, step: int) -> Iterator[bytes]:
    return (data[i : i + step] for i in range(0, len(data), step))


def streamed(data: bytes, step: int) -> bytes:
    pieces: list[bytes] = []
    blocks = Blocks(REDACTOR.body, pieces.append)
    for piece in cut(data, step):
        blocks.feed(piece)
    blocks.end()
    return b"".join(pieces)


def filler(size: int) -> bytearray:
    return bytearray(b"lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


def with_secret_at(size: int, *offsets: int) -> bytes:
    body = filler(size)
    for offset in offsets:
        body[offset - 1 : offset + len(SECRET) + 1] = b" " + SECRET + b" "
    return bytes(body)


@pytest.mark.parametrize("step", [997, 65_537, BLOCK, 4 * BLOCK])
def test_a_stream_is_redacted_the_same_however_the_network_cuts_it(step: int) -> None:
    data = with_secret_at(3 * BLOCK + 12_345, 100, BLOCK - 10, 2 * BLOCK + REACH - 5)
    stored = streamed(data, step)
    assert stored == redacted(REDACTOR.body, data)
    assert len(stored) == len(data) and SECRET not in stored


@pytest.mark.parametrize("offset", [BLOCK - 20, BLOCK - REACH, BLOCK + REACH - 10, 2 * BLOCK - 1])
def test_a_secret_across_a_block_boundary_is_redacted(offset: int) -> None:
    data = with_secret_at(3 * BLOCK, offset)
    stored = streamed(data, 10_000)
    assert SECRET not in stored and b"[redacted:" in stored
    assert stored[:100] == data[:100]  # the rest is as sent


def test_a_small_body_is_redacted_whole_as_it_always_was() -> None:
    data = with_secret_at(BLOCK + REACH, 10, BLOCK + REACH - len(SECRET) - 2)
    assert redacted(REDACTOR.body, data) == REDACTOR.body(data)


def test_a_held_body_lands_redacted_and_keeps_its_bytes() -> None:
    body = Body(REDACTOR, ())
    pieces = [b'{"echo": "', SECRET[:10], SECRET[10:], b'"}']
    for piece in pieces:
        body.feed(piece)
    landed = body.end()

    assert body.held == b"".join(pieces) and not body.spilled
    assert landed.size == len(b"".join(pieces)) and landed.ref is None
    assert SECRET not in landed.stored and len(landed.stored) == landed.size
    assert landed.decoded is not None and landed.decoded.data == landed.stored == landed.keyed


def test_what_the_request_carried_is_scrubbed_from_its_answer() -> None:
    echoed = b"token=abcdefgh12345678 again"
    body = Body(REDACTOR, (b"abcdefgh12345678",))
    body.feed(echoed)
    assert b"abcdefgh12345678" not in body.end().stored


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_an_encoded_body_is_decoded_once_and_stored_byte_exact_without_a_secret(
    coding: str,
) -> None:
    content = json.dumps({"model": "m", "input": "hi"}).encode()
    sent = ENCODERS[coding](content)
    body = Body(REDACTOR, (), ((b"content-encoding", coding.encode()),))
    for piece in cut(sent, 7):
        body.feed(piece)
    landed = body.end()

    assert landed.stored == sent and not landed.reencoded
    assert landed.keyed == content
    headers = ((b"content-length", b"9"),)
    assert landed.headers(headers) == headers


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_a_secret_inside_an_encoded_body_is_stored_re_encoded(
    coding: str, caplog: pytest.LogCaptureFixture
) -> None:
    content = json.dumps({"echo": TOKEN}).encode()
    sent = ENCODERS[coding](content)
    body = Body(REDACTOR, (), ((b"content-encoding", coding.encode()),), what="answer")
    body.feed(sent)
    with caplog.at_level(logging.WARNING, "freezeframe.record"):
        landed = body.end()

    assert landed.reencoded and SECRET not in landed.keyed and b"[redacted:" in landed.keyed
    again = Body(REDACTOR, (), ((b"content-encoding", coding.encode()),))
    again.feed(landed.stored)
    assert again.end().keyed == landed.keyed  # the stored bytes decode to the redacted content
    fixed = dict(landed.headers(GZIP))
    assert fixed[b"content-length"] == str(len(landed.stored)).encode()
    assert f"{coding}-encoded answer" in caplog.text and "not byte-exact" in caplog.text


def test_a_compression_bomb_is_stored_as_sent_and_never_held_decoded() -> None:
    bomb = gzip.compress(b"\0" * (HELD_DECODED + 1))
    body = Body(REDACTOR, (), GZIP)
    body.feed(bomb)
    landed = body.end()

    assert landed.stored == bomb and not landed.reencoded
    assert landed.decoded is not None and not landed.decoded.whole
    assert landed.decoded.data == b"" and "decodes to more than" in (landed.decoded.note or "")
    assert landed.keyed == bomb


def test_a_body_cut_off_mid_coding_without_a_secret_is_stored_as_sent() -> None:
    sent = gzip.compress(json.dumps({"echo": "nothing secret here"}).encode() * 50)
    body = Body(REDACTOR, (), GZIP)
    body.feed(sent[: len(sent) // 2])
    landed = body.end()

    assert landed.decoded is not None and not landed.decoded.whole
    assert landed.stored == sent[: len(sent) // 2]


def test_a_body_past_the_threshold_spills_to_the_store(store: Store) -> None:
    data = with_secret_at(LARGE_BODY + 3 * BLOCK, 5, LARGE_BODY - 3, LARGE_BODY + BLOCK - 7)
    seen: list[bytes] = []
    body = Body(REDACTOR, (), spill=store.blob_writer, blocks=seen.append)
    for piece in cut(data, 65_536):
        body.feed(piece)
        if body.size > LARGE_BODY:
            assert body.spilled and body.held is None
        else:
            assert not body.spilled
    landed = body.end()

    assert landed.stored == b"" and landed.decoded is None and landed.ref is not None
    assert landed.ref.size == len(data)
    kept = b"".join(store.read_blob(landed.ref))
    assert kept == redacted(REDACTOR.body, data) == b"".join(seen)
    assert SECRET not in kept


def test_a_body_known_to_be_large_spills_from_its_first_byte(store: Store) -> None:
    body = Body(REDACTOR, (), spill=store.blob_writer, spill_now=True)
    assert body.spilled
    body.feed(b"abc")
    landed = body.end()
    assert landed.ref is not None and b"".join(store.read_blob(landed.ref)) == b"abc"


def test_a_body_the_store_cannot_keep_still_passes_and_says_so(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    body = Body(REDACTOR, (), spill=store.blob_writer, spill_now=True, what="answer")
    body.feed(b"x" * (BLOCK + REACH))
    store.close()
    with caplog.at_level(logging.ERROR, "freezeframe.record"):
        body.feed(b"y" * BLOCK)
        landed = body.end()

    assert landed.ref is None and landed.size == 2 * BLOCK + REACH
    assert "answer not stored" in caplog.text


def noise(size: int) -> bytes:
    """Bytes no coder shrinks, so a cut falls after several blocks of every coding."""
    return hashlib.shake_256(b"noise").digest(size)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_a_cut_off_compressed_answer_with_a_key_is_stored_decodable_without_it(
    coding: str,
) -> None:
    """The stream is cut mid-way (the upstream went away): what decoded is scanned, and the
    body is stored re-encoded as a stream that still decodes and still stops where it did."""
    from freezeframe.storage.encodings import decode, encode

    secret = b"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"
    content = b'{"note": "' + secret + b'", "filler": "' + noise(600_000) + b'"}'
    whole = encode(content, [coding])
    cut = whole[: len(whole) * 3 // 4]
    body = Body(Redactor(KEY), (), [(b"content-encoding", coding.encode())])
    body.feed(cut)
    landed = body.end()
    assert landed.reencoded
    found = decode(landed.stored, [coding])
    assert not found.whole and b"[redacted:" in found.data and secret not in found.data
    assert secret not in landed.stored


def test_the_start_of_a_compression_bomb_with_a_key_is_stored_without_it() -> None:
    secret = b"glpat-Qm7Vb3kP9sR2tW5nL8cF"
    bomb = gzip.compress(secret + b"\0" * (HELD_DECODED + 1024), mtime=0)
    body = Body(Redactor(KEY), (), [(b"content-encoding", b"gzip")])
    body.feed(bomb)
    landed = body.end()
    from freezeframe.storage.encodings import decode

    start = decode(landed.stored, ["gzip"], 1024).data
    assert start.startswith(b"[r:") and secret not in start


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_a_compressed_body_that_spills_is_scanned_decoded_and_stored_decodable(
    store: Store, coding: str
) -> None:
    """Over LARGE_BODY it is never held: its content is decoded as it streams, and the key
    deep inside it (after several MiB) is taken out; the stored body still decodes."""
    from freezeframe.storage.encodings import Encoder, decode

    secret = b"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"
    content = noise(6 * 1024 * 1024) + b" key " + secret + b" " + noise(3 * 1024 * 1024)
    encoder = Encoder([coding], fast=True)
    sent = encoder.feed(content) + encoder.end()
    assert len(sent) > LARGE_BODY
    body = Body(REDACTOR, (), [(b"content-encoding", coding.encode())], spill=store.blob_writer)
    for piece in cut(sent, 65_536):
        body.feed(piece)
    landed = body.end()
    assert landed.reencoded and landed.ref is not None
    kept = b"".join(store.read_blob(landed.ref))
    found = decode(kept, [coding], 2 * len(content))
    assert found.whole and secret not in found.data and len(found.data) == len(content)
    assert (
        dict(landed.headers(((b"content-length", b"1"),)))[b"content-length"]
        == str(len(kept)).encode()
    )


def test_a_compressed_body_that_spills_without_a_secret_is_stored_byte_exact(
    store: Store,
) -> None:
    sent = gzip.compress(noise(10 * 1024 * 1024), compresslevel=1, mtime=0)
    body = Body(REDACTOR, (), GZIP, spill=store.blob_writer)
    for piece in cut(sent, 65_536):
        body.feed(piece)
    landed = body.end()
    assert not landed.reencoded and landed.ref is not None
    assert b"".join(store.read_blob(landed.ref)) == sent
