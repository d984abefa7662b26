"""Content codings undone (and done again), once, for every reader of recorded bodies.

The store keeps bodies as they crossed the wire, ``Content-Encoding`` and all, because replay
must send the very bytes a client received. Whoever reads what a body says (a conversation,
a tool call's arguments in a request) must undo the coding first, and they all do it here:
gzip and deflate with the standard library, zstd with zstandard, br with brotli (which
mitmproxy pins, and which freezeframe depends on for this): the search index here, the read
model in ``evidence``, edits and resends. An edited answer is encoded again (``encode``) in
the coding it was recorded in.

Decoding is bounded: a few kilobytes of hostile input can inflate to gigabytes, so output
stops at ``limit`` bytes. A body cut off mid-stream (an answer whose upstream went away)
gives what decoded before the cut. Either way the result says it is not whole, and why;
nothing here raises, whatever the bytes.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import brotli
import zstandard

from freezeframe.storage.records import Header

MAX_DECODED = 64 * 1024 * 1024
"""The most bytes one body decodes to; the rest of a larger one is not read."""
HELD_DECODED = 16 * 1024 * 1024
"""The most a body the proxy holds decodes to, when it is keyed or scanned for secrets (the
proxy, and rekey and explain, which must key as it does): decoding costs memory while it
runs, and a body that would decode to more is read as sent."""

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS
_MAX_GZIP_MEMBERS = 64
"""RFC 1952 allows members one after another; a body of more than this many is no real one."""
_ZSTD_MAX_RATIO = 128 * 1024 // 4
_ZSTD_MIN_SLICE = 64


@dataclass(frozen=True, slots=True)
class Decoded:
    """A body with its content codings undone, as far as they could be."""

    data: bytes
    """The decoded bytes; when not ``whole``, those that decoded before the trouble."""
    whole: bool
    """Every byte decoded, within the limit."""
    note: str | None = None
    """Why the body is not whole: an unknown coding, a cut-off stream, the size limit."""


class _Cut(Exception):
    """The coded stream ended before its end; ``args[0]`` holds what decoded."""


class _TooLarge(Exception):
    """The output passed the limit; ``args[0]`` holds the first ``limit`` bytes."""


def content_codings(headers: Sequence[Header]) -> tuple[str, ...]:
    """The codings applied to a body, in the order they were applied.

    RFC 9110 §8.4: ``Content-Encoding`` lists them in that order, and repeated header lines
    join as one list. ``identity`` means none and is left out.
    """
    codings: list[str] = []
    for name, value in headers:
        if name.lower() == b"content-encoding":
            for token in value.decode("latin-1").split(","):
                coding = token.strip().lower()
                if coding and coding != "identity":
                    codings.append(coding)
    return tuple(codings)


def decode_body(data: bytes, headers: Sequence[Header], limit: int = MAX_DECODED) -> Decoded:
    """``data`` as its ``Content-Encoding`` headers say to decode it."""
    return decode(data, content_codings(headers), limit)


def decode(data: bytes, codings: Sequence[str], limit: int = MAX_DECODED) -> Decoded:
    """Undo ``codings`` (in the order applied, so the last is undone first)."""
    for coding in reversed(codings):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            return Decoded(b"", False, f"content coding {coding!r} is not one freezeframe reads")
        try:
            data = decoder(data, limit)
        except _Cut as cut:
            return Decoded(cut.args[0], False, f"the {coding} stream is cut off")
        except _TooLarge as large:
            return Decoded(large.args[0], False, f"decodes to more than {limit:,} bytes")
        except (zlib.error, zstandard.ZstdError, brotli.error) as error:
            return Decoded(b"", False, f"the {coding} stream is damaged: {error}")
    if len(data) > limit:
        return Decoded(data[:limit], False, f"larger than {limit:,} bytes")
    return Decoded(data, True)


def _zlib(data: bytes, limit: int, wbits: int) -> bytes:
    """One zlib, gzip or raw deflate stream; gzip members that follow one another too."""
    out = bytearray()
    rest = data
    for _ in range(_MAX_GZIP_MEMBERS):
        stream = zlib.decompressobj(wbits)
        out += stream.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _TooLarge(bytes(out[:limit]))
        if not stream.eof:  # output stopped short of the limit: the input ran out
            raise _Cut(bytes(out))
        rest = stream.unused_data
        if wbits != _GZIP_WBITS or not rest.strip(b"\0"):
            return bytes(out)
    raise zlib.error(f"more than {_MAX_GZIP_MEMBERS} gzip members")


def _gzip(data: bytes, limit: int) -> bytes:
    return _zlib(data, limit, _GZIP_WBITS)


def _deflate(data: bytes, limit: int) -> bytes:
    """RFC 9110 §8.4.1.2 means the zlib format; some servers send a raw deflate stream."""
    try:
        return _zlib(data, limit, _ZLIB_WBITS)
    except zlib.error:
        return _zlib(data, limit, _RAW_DEFLATE_WBITS)


def _zstd(data: bytes, limit: int) -> bytes:
    """Frames one after another (RFC 8878 §3.1), fed in slices so that output stays bounded.

    The decompressor itself has no output limit, so each slice is at most the budget left
    divided by zstd's largest expansion: an RLE block is 4 bytes for 128 KiB of output.
    """
    out = bytearray()
    rest = data
    while rest:
        stream = zstandard.ZstdDecompressor().decompressobj()
        offset = 0
        while not stream.eof and offset < len(rest):
            size = max(_ZSTD_MIN_SLICE, (limit + 1 - len(out)) // _ZSTD_MAX_RATIO)
            out += stream.decompress(rest[offset : offset + size])
            offset += size
            if len(out) > limit:
                raise _TooLarge(bytes(out[:limit]))
        if not stream.eof:
            raise _Cut(bytes(out))
        rest = stream.unused_data + rest[offset:]
    return bytes(out)


def _br(data: bytes, limit: int) -> bytes:
    """Brotli's own output limit stops a call early, and a call on a cut stream returns its
    output a piece at a time; calls with no more input drain what it holds."""
    stream = brotli.Decompressor()
    out = bytearray(stream.process(data, output_buffer_limit=limit + 1))
    while len(out) <= limit and not stream.is_finished():
        piece = stream.process(b"", output_buffer_limit=limit + 1 - len(out))
        if not piece:
            break
        out += piece
    if len(out) > limit:
        raise _TooLarge(bytes(out[:limit]))
    if not stream.is_finished():
        raise _Cut(bytes(out))
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gzip,
    "x-gzip": _gzip,  # RFC 9110 §8.4.1.3: a recipient should treat it as gzip
    "deflate": _deflate,
    "br": _br,
    "zstd": _zstd,
}


class _Stage:
    """One content coding, written as a stream; ``fast`` trades size for CPU, for a body
    too large to hold that is encoded again as it streams."""

    def __init__(self, coding: str, fast: bool) -> None:
        self._zlib = self._br = self._zstd = None
        if coding in ("gzip", "x-gzip", "deflate"):
            wbits = _GZIP_WBITS if coding != "deflate" else _ZLIB_WBITS
            self._zlib = zlib.compressobj(1 if fast else 6, zlib.DEFLATED, wbits)
        elif coding == "br":
            self._br = brotli.Compressor(quality=1 if fast else 5)
        elif coding == "zstd":
            self._zstd = zstandard.ZstdCompressor(level=1 if fast else 3).compressobj()
        else:
            raise ValueError(f"content coding {coding!r} is not one freezeframe writes")

    def feed(self, data: bytes) -> bytes:
        if self._zlib is not None:
            return self._zlib.compress(data)
        if self._br is not None:
            return bytes(self._br.process(data))
        assert self._zstd is not None
        return self._zstd.compress(data)

    def end(self, *, cut: bool) -> bytes:
        """The rest: the stream's end, or (``cut``) what makes all that was fed decode,
        leaving the stream open, as a body cut off on the wire was."""
        if self._zlib is not None:
            return self._zlib.flush(zlib.Z_SYNC_FLUSH if cut else zlib.Z_FINISH)
        if self._br is not None:
            return bytes(self._br.flush() if cut else self._br.finish())
        assert self._zstd is not None
        mode = zstandard.COMPRESSOBJ_FLUSH_BLOCK if cut else zstandard.COMPRESSOBJ_FLUSH_FINISH
        return self._zstd.flush(mode)


class Encoder:
    """``codings`` applied in order to a body that arrives in pieces, so a body too large
    to hold is encoded again as it streams. Raises ValueError for a coding it cannot write."""

    def __init__(self, codings: Sequence[str], *, fast: bool = False) -> None:
        self._stages = [_Stage(coding, fast) for coding in codings]

    def feed(self, data: bytes) -> bytes:
        for stage in self._stages:
            data = stage.feed(data)
        return data

    def end(self, *, cut: bool = False) -> bytes:
        out = b""
        for stage in self._stages:
            out = stage.feed(out) + stage.end(cut=cut)
        return out


PIECE = 1024 * 1024
"""The most one step of a streamed decoding hands on."""


class _Undo:
    """One content coding undone as its bytes arrive, handing on at most PIECE bytes at a
    time, so a few bytes of a bomb never become one huge allocation."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.eof = False
        self._wbits = {"deflate": _ZLIB_WBITS, "br": 0, "zstd": 0}.get(coding, _GZIP_WBITS)
        self._zlib = (
            zlib.decompressobj(self._wbits) if coding != "br" and coding != "zstd" else None
        )
        self._br = brotli.Decompressor() if coding == "br" else None
        self._zstd = zstandard.ZstdDecompressor().decompressobj() if coding == "zstd" else None
        self._started = False

    def feed(self, data: bytes, emit: Callable[[bytes], None]) -> None:
        if self._zlib is not None:
            self._inflate(data, emit)
        elif self._br is not None:
            emit(bytes(self._br.process(data, output_buffer_limit=PIECE)))
            while not self._br.is_finished():
                piece = bytes(self._br.process(b"", output_buffer_limit=PIECE))
                if not piece:
                    break
                emit(piece)
            self.eof = self._br.is_finished()
        else:
            step = max(_ZSTD_MIN_SLICE, PIECE // _ZSTD_MAX_RATIO)
            for offset in range(0, len(data), step):
                assert self._zstd is not None
                if self._zstd.eof:  # a next frame (RFC 8878 §3.1)
                    rest = self._zstd.unused_data + data[offset:]
                    self._zstd = zstandard.ZstdDecompressor().decompressobj()
                    self.feed(rest, emit)
                    return
                emit(self._zstd.decompress(data[offset : offset + step]))
            self.eof = self._zstd is not None and self._zstd.eof

    def _inflate(self, data: bytes, emit: Callable[[bytes], None]) -> None:
        assert self._zlib is not None
        buffer = data
        while buffer:
            try:
                emit(self._zlib.decompress(buffer, PIECE))
            except zlib.error:
                if self.coding != "deflate" or self._started:
                    raise
                self._wbits = _RAW_DEFLATE_WBITS  # a raw deflate stream, as some servers send
                self._zlib = zlib.decompressobj(self._wbits)
                continue
            self._started = True
            buffer = self._zlib.unconsumed_tail
            if self._zlib.eof:
                rest = self._zlib.unused_data
                self.eof = True
                if self._wbits != _GZIP_WBITS or not rest.strip(b"\0"):
                    return
                self._zlib = zlib.decompressobj(self._wbits)  # the next gzip member
                self.eof = False
                buffer = rest


class StreamDecoder:
    """``codings`` undone as a body too large to hold arrives, its content handed to
    ``out`` in pieces; it stops for good past ``limit`` bytes of content (``over``), at a
    damaged stream or a coding it does not read (``failed``)."""

    def __init__(self, codings: Sequence[str], out: Callable[[bytes], None], limit: int) -> None:
        self.failed = any(coding not in _DECODERS for coding in codings)
        self.over = False
        self._undo = [_Undo(coding) for coding in reversed(codings)] if not self.failed else []
        self._out = out
        self._left = limit

    @property
    def whole(self) -> bool:
        """Decoded to its end, within the limit."""
        return not (self.failed or self.over) and all(undo.eof for undo in self._undo)

    def feed(self, data: bytes) -> None:
        if self.failed or self.over or not data:
            return
        try:
            self._stage(0, data)
        except (zlib.error, zstandard.ZstdError, brotli.error):
            self.failed = True

    def _stage(self, index: int, data: bytes) -> None:
        if self.over or not data:
            return
        if index == len(self._undo):
            if len(data) > self._left:
                data, self.over = data[: self._left], True
            self._left -= len(data)
            if data:
                self._out(data)
            return
        self._undo[index].feed(data, lambda piece: self._stage(index + 1, piece))


def encode_start(body: bytes, codings: Sequence[str]) -> bytes:
    """``body`` encoded as the start of a stream that goes on (its end never written): what
    a body cut off on the wire, or a bomb read only as far as a bound, is stored as once a
    secret is taken out of the part that decoded."""
    encoder = Encoder(codings)
    return encoder.feed(body) + encoder.end(cut=True)


def encode(body: bytes, codings: Sequence[str]) -> bytes:
    """``body`` with ``codings`` applied in order, as an edited answer is stored in the
    encoding it was recorded in. Raises ValueError for a coding this cannot write."""
    data = body
    for coding in codings:
        if coding in ("gzip", "x-gzip"):
            data = gzip.compress(data, mtime=0)
        elif coding == "deflate":
            data = zlib.compress(data)
        elif coding == "br":
            data = brotli.compress(data)
        elif coding == "zstd":
            data = zstandard.ZstdCompressor().compress(data)
        else:
            raise ValueError(f"content coding {coding!r} is not one freezeframe writes")
    return data
