"""Content-Encoding decoding for what reads stored bodies, with the decoded size capped.

Bodies are stored as they crossed the wire, compressed if they were sent compressed. Whatever
reads their meaning (the search index here, the read model in ``evidence``) decodes them
through this one function, which stops at ``limit`` bytes: a hostile body of a few kilobytes
that expands a thousandfold is refused, never held whole.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Sequence

import brotli
import zstandard

MAX_DECODED = 64 * 1024 * 1024
"""The most any decoded body may hold: larger ones are refused (None)."""
_STEP = 1024 * 1024


class TooLarge(Exception):
    """The decoded body would exceed the limit."""


def decode(body: bytes, coding: str, limit: int = MAX_DECODED) -> bytes | None:
    """``body`` with the ``Content-Encoding`` ``coding`` undone (a list is undone last
    coding first); None when it does not decode, names an unknown coding, or would exceed
    ``limit`` bytes decoded."""
    data = body
    for name in reversed([part.strip().lower() for part in coding.split(",") if part.strip()]):
        try:
            data = _decoder(name)(data, limit)
        except (TooLarge, ValueError, zlib.error, zstandard.ZstdError, brotli.error):
            return None
    return data


def content_coding(headers: Sequence[tuple[bytes, bytes]]) -> str:
    """Every ``Content-Encoding`` value of raw headers, joined as one list."""
    return ", ".join(
        value.decode("latin-1") for name, value in headers if name.lower() == b"content-encoding"
    )


def _decoder(name: str) -> Callable[[bytes, int], bytes]:
    if name in ("identity", ""):
        return _identity
    if name in ("gzip", "x-gzip"):
        return _gzip
    if name == "deflate":
        return _deflate
    if name == "br":
        return _brotli
    if name == "zstd":
        return _zstd
    raise ValueError(f"unknown content coding {name!r}")


def _identity(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise TooLarge
    return data


def _inflate(data: bytes, limit: int, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = bytearray()
    pending = data
    while pending:
        out += inflater.decompress(pending, _STEP)
        if len(out) > limit:
            raise TooLarge
        pending = inflater.unconsumed_tail
        if inflater.eof:
            break
    out += inflater.flush()
    if len(out) > limit:
        raise TooLarge
    return bytes(out)


def _gzip(data: bytes, limit: int) -> bytes:
    return _inflate(data, limit, 16 + zlib.MAX_WBITS)


def _deflate(data: bytes, limit: int) -> bytes:
    """zlib-wrapped, as the standard says, or raw deflate, as some servers send it."""
    try:
        return _inflate(data, limit, zlib.MAX_WBITS)
    except zlib.error:
        return _inflate(data, limit, -zlib.MAX_WBITS)


def _brotli(data: bytes, limit: int) -> bytes:
    decompressor = brotli.Decompressor()
    out = bytearray(decompressor.process(data, output_buffer_limit=_STEP))
    while not decompressor.is_finished():
        if len(out) > limit:
            raise TooLarge
        piece = decompressor.process(b"", output_buffer_limit=_STEP)
        if not piece and decompressor.can_accept_more_data():
            raise ValueError("brotli stream ends early")
        out += piece
    if len(out) > limit:
        raise TooLarge
    return bytes(out)


def _zstd(data: bytes, limit: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    out = bytearray()
    while piece := reader.read(_STEP):
        out += piece
        if len(out) > limit:
            raise TooLarge
    return bytes(out)


def encode(body: bytes, coding: str) -> bytes:
    """``body`` with the ``Content-Encoding`` ``coding`` applied (a list in its order), as an
    edited answer is stored in the encoding it was recorded in. Raises ValueError for a
    coding this cannot write."""
    data = body
    for name in [part.strip().lower() for part in coding.split(",") if part.strip()]:
        if name in ("gzip", "x-gzip"):
            data = gzip.compress(data, mtime=0)
        elif name == "deflate":
            data = zlib.compress(data)
        elif name == "br":
            data = brotli.compress(data)
        elif name == "zstd":
            data = zstandard.ZstdCompressor().compress(data)
        elif name != "identity":
            raise ValueError(f"unknown content coding {name!r}")
    return data
