"""The one content decoder of evidence: every coding the proxy records, bounded, never raising."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.upstream import ENCODERS, encoded_body

from freezeframe.storage.encodings import MAX_DECODED, content_codings, decode, decode_body

CODINGS = ("gzip", "br", "zstd", "deflate")


@pytest.mark.parametrize("coding", [*CODINGS, "identity"])
def test_the_upstreams_encoded_bodies_decode_to_what_it_meant(coding: str) -> None:
    sent, meant = encoded_body(coding, 1)
    decoded = decode_body(sent, ((b"Content-Encoding", coding.upper().encode()),))
    assert decoded.data == meant
    assert decoded.whole and decoded.note is None


@given(data=st.binary(max_size=4096), coding=st.sampled_from(CODINGS))
@settings(max_examples=60, deadline=None)
def test_any_bytes_come_back_whole(data: bytes, coding: str) -> None:
    assert decode(ENCODERS[coding](data), [coding]).data == data


@pytest.mark.parametrize("coding", CODINGS)
def test_a_cut_off_body_gives_what_decoded_before_the_cut_and_says_so(coding: str) -> None:
    meant = b"".join(b"line %06d of a long answer\n" % n for n in range(20_000))
    sent = ENCODERS[coding](meant)
    decoded = decode(sent[: len(sent) * 3 // 4], [coding])
    assert not decoded.whole
    assert decoded.note == f"the {coding} stream is cut off"
    assert meant.startswith(decoded.data)
    if coding != "zstd":  # zstd gives nothing of a block it did not get whole
        assert len(decoded.data) > len(meant) // 2


@pytest.mark.parametrize("coding", CODINGS)
def test_a_small_body_that_inflates_past_the_limit_stops_at_it(coding: str) -> None:
    limit = 1024 * 1024
    bomb = ENCODERS[coding](b"\0" * (64 * limit))
    assert len(bomb) < limit // 4
    decoded = decode(bomb, [coding], limit=limit)
    assert decoded.data == b"\0" * limit
    assert not decoded.whole
    assert decoded.note == f"decodes to more than {limit:,} bytes"


def test_the_default_limit_is_64_mib() -> None:
    assert MAX_DECODED == 64 * 1024 * 1024


@pytest.mark.parametrize("coding", CODINGS)
def test_damaged_bytes_are_said_to_be_damaged(coding: str) -> None:
    decoded = decode(b"this was never compressed", [coding])
    assert (decoded.data, decoded.whole) == (b"", False)
    assert decoded.note is not None and decoded.note.startswith(f"the {coding} stream is damaged")


def test_codings_are_undone_last_applied_first() -> None:
    meant = b'{"twice": true}'
    sent = ENCODERS["br"](gzip.compress(meant))
    headers = ((b"content-encoding", b"gzip"), (b"Content-Encoding", b"identity, br"))
    assert content_codings(headers) == ("gzip", "br")
    assert decode_body(sent, headers).data == meant


def test_deflate_also_reads_the_raw_stream_some_servers_send() -> None:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = compressor.compress(b"raw deflate") + compressor.flush()
    assert decode(raw, ["deflate"]).data == b"raw deflate"


def test_gzip_members_one_after_another_are_one_body() -> None:
    decoded = decode(gzip.compress(b"first ") + gzip.compress(b"second"), ["x-gzip"])
    assert decoded.data == b"first second" and decoded.whole


def test_an_unknown_coding_is_named_and_nothing_is_guessed() -> None:
    decoded = decode_body(b"\x1f\x9d...", ((b"content-encoding", b"compress"),))
    assert decoded == decode(b"\x1f\x9d...", ["compress"])
    assert (decoded.data, decoded.whole) == (b"", False)
    assert decoded.note == "content coding 'compress' is not one freezeframe reads"


def test_an_unencoded_body_past_the_limit_is_cut_too() -> None:
    decoded = decode(b"x" * 10, [], limit=4)
    assert (decoded.data, decoded.whole, decoded.note) == (b"xxxx", False, "larger than 4 bytes")
