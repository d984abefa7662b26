"""Long jsonl lines read in pieces: whatever the split, the document read back is the one
written, its long strings spooled and decoded as JSON would decode them."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.exchange_formats import longlines
from freezeframe.exchange_formats.longlines import read_long_line

# Quotes, backslashes, controls, non-ASCII and characters beyond the BMP (surrogate pairs
# when escaped), so escapes and UTF-8 sequences fall on every piece boundary.
TEXT = st.text(
    alphabet=st.sampled_from(['"', "\\", "\n", "\x00", "a", "é", "€", "😀", "/", "u"]),
    min_size=0,
    max_size=80,
)


def read_back(line: bytes, piece: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(longlines, "SPOOL_ABOVE", 8)
    monkeypatch.setattr(longlines, "PIECE", piece)
    source = io.BytesIO(line)
    read = read_long_line(source, source.readline(piece))
    try:
        document = json.loads(bytes(read.skeleton))
        return _restore(document, read.spooled)
    finally:
        read.close()


def _restore(value: Any, spooled: dict[str, longlines.SpooledString]) -> Any:
    if isinstance(value, str) and value in spooled:
        return "".join(spooled[value].text())
    if isinstance(value, dict):
        return {key: _restore(item, spooled) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore(item, spooled) for item in value]
    return value


@given(texts=st.lists(TEXT, min_size=1, max_size=4), piece=st.integers(1, 9), ascii=st.booleans())
def test_any_document_reads_back_the_same_whatever_the_pieces(
    texts: list[str], piece: int, ascii: bool
) -> None:
    document = {"body": {"text": texts[0]}, "more": texts[1:], "n": 1}
    line = json.dumps(document, ensure_ascii=ascii).encode() + b"\n"
    with pytest.MonkeyPatch.context() as patch:
        assert read_back(line, piece, patch) == document


def test_a_long_base64_string_decodes_piece_by_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256)) * 3
    line = json.dumps({"base64": base64.b64encode(data).decode()}).encode() + b"\n"
    monkeypatch.setattr(longlines, "SPOOL_ABOVE", 8)
    monkeypatch.setattr(longlines, "PIECE", 7)
    source = io.BytesIO(line)
    read = read_long_line(source, source.readline(7))
    try:
        (spool,) = read.spooled.values()
        assert b"".join(spool.base64()) == data
    finally:
        read.close()


def test_a_spooled_string_that_is_not_base64_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    line = json.dumps({"base64": "not base64 at all!"}).encode() + b"\n"
    monkeypatch.setattr(longlines, "SPOOL_ABOVE", 8)
    source = io.BytesIO(line)
    read = read_long_line(source, source.readline(5))
    try:
        (spool,) = read.spooled.values()
        with pytest.raises(ValueError, match="not valid base64"):
            b"".join(spool.base64())
    finally:
        read.close()
