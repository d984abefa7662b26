"""jsonl lines too long to hold, read with their long strings spooled to temporary files.

A jsonl export carries every body in its line, so a line can be as long as the largest body
(a gigabyte). Such a line is read in pieces; each JSON string in it longer than SPOOL_ABOVE
is written to a temporary file as it is found and replaced in the line by a placeholder, so
what ``json.loads`` then sees is small. The body's reader decodes the spooled string (JSON
escapes, then UTF-8 or base64) piece by piece when the store asks for it.

JSON makes this safe to do without a parser: a raw newline cannot occur inside a string, so a
line ends at its first newline; and a string ends at the first quote that is not escaped,
which a count of the backslashes before it tells.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import tempfile
from collections.abc import Iterator
from typing import IO

SPOOL_ABOVE = 8 * 1024 * 1024
"""A string longer than this (as written, escaped) is spooled instead of held."""
PIECE = 1024 * 1024

_BACKSLASH = ord("\\")
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\Z")


class SpooledString:
    """One JSON string's content as written (still escaped), in a temporary file."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="freezeframe-import-")

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._file.write(data)

    def close(self) -> None:
        self._file.close()

    def _raw(self) -> Iterator[bytes]:
        self._file.seek(0)
        while piece := self._file.read(PIECE):
            yield piece

    def text(self) -> Iterator[str]:
        """The string, unescaped, piece by piece; ValueError where it is not valid JSON."""
        carry = b""
        for piece in self._raw():
            data = carry + piece
            cut = _safe_end(data)
            carry = data[cut:]
            if cut:
                yield json.loads(b'"' + data[:cut] + b'"')
        if carry:
            yield json.loads(b'"' + carry + b'"')

    def utf8(self) -> Iterator[bytes]:
        for text in self.text():
            yield text.encode("utf-8", "surrogatepass")

    def base64(self) -> Iterator[bytes]:
        """The bytes the string holds as base64; ValueError where it is not base64."""
        carry = ""
        for text in self.text():
            data = carry + text
            whole = len(data) - len(data) % 4
            carry = data[whole:]
            try:
                yield base64.b64decode(data[:whole], validate=True)
            except binascii.Error:
                raise ValueError("not valid base64") from None
        if carry:
            raise ValueError("not valid base64: its length is not a multiple of 4")


def _safe_end(data: bytes) -> int:
    """Where ``data`` may be cut without splitting an escape, a surrogate pair or a UTF-8
    character (the rest waits for the next piece).

    In valid JSON only the last escape can be incomplete, and escapes are at most six bytes,
    so the last backslash within the last twelve tells: it begins an escape when it ends an
    odd run of backslashes (an even run is pairs, each an escaped backslash)."""
    cut = len(data)
    start = _escape_start(data, cut)
    if start is not None:
        needed = 6 if data[start + 1 : start + 2] == b"u" else 2
        if cut - start < needed:
            cut = start
            start = _escape_start(data, cut)
    if start is not None and _HIGH_SURROGATE.search(data, start, cut):
        cut = start
    for back in range(1, min(4, cut) + 1):
        byte = data[cut - back]
        if byte < 0x80:
            break
        if byte >= 0xC0:  # a lead byte: is its sequence whole?
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if back < length:
                cut -= back
            break
    return cut


def _escape_start(data: bytes, cut: int) -> int | None:
    """Where the last escape before ``cut`` begins, if one begins in its last twelve bytes."""
    start = data.rfind(b"\\", max(0, cut - 12), cut)
    if start == -1:
        return None
    run = 0
    while start - run >= 0 and data[start - run] == _BACKSLASH:
        run += 1
    return start if run % 2 == 1 else None


class LongLine:
    """One line read in pieces: its text with long strings replaced by placeholders, and the
    spooled strings by placeholder. Close it to delete the spools."""

    def __init__(self) -> None:
        self.skeleton = bytearray()
        self.spooled: dict[str, SpooledString] = {}
        self._token = secrets.token_hex(8)
        self._in_string = False
        self._backslashes = 0
        """Backslashes that ended the last piece inside a string."""
        self._held = bytearray()
        self._spool: SpooledString | None = None

    def close(self) -> None:
        for spool in self.spooled.values():
            spool.close()
        if self._spool is not None:
            self._spool.close()

    def feed(self, piece: bytes) -> None:
        position = 0
        while position < len(piece):
            if not self._in_string:
                quote = piece.find(b'"', position)
                if quote == -1:
                    self.skeleton += piece[position:]
                    return
                self.skeleton += piece[position : quote + 1]
                self._in_string, self._backslashes = True, 0
                position = quote + 1
                continue
            end = self._string_end(piece, position)
            if end == -1:
                self._hold(memoryview(piece)[position:])
                tail = len(piece) - len(piece.rstrip(b"\\"))
                whole = tail == len(piece) - position
                self._backslashes = tail + (self._backslashes if whole else 0)
                return
            self._hold(memoryview(piece)[position:end])
            self._end_string()
            position = end + 1

    def _string_end(self, piece: bytes, position: int) -> int:
        """Where the string that runs on from ``position`` ends in ``piece``, or -1."""
        quote = piece.find(b'"', position)
        while quote != -1:
            run = 0
            while quote - run - 1 >= position and piece[quote - run - 1] == _BACKSLASH:
                run += 1
            if quote - run == position:
                run += self._backslashes
            if run % 2 == 0:
                return quote
            quote = piece.find(b'"', quote + 1)
        return -1

    def _hold(self, data: memoryview) -> None:
        if self._spool is not None:
            self._spool.write(data)
            return
        self._held += data
        if len(self._held) > SPOOL_ABOVE:
            self._spool = SpooledString()
            self._spool.write(self._held)
            self._held = bytearray()

    def _end_string(self) -> None:
        self._in_string = False
        if self._spool is None:
            self.skeleton += self._held + b'"'
            self._held = bytearray()
            return
        mark = f"\x00spool-{self._token}-{len(self.spooled)}\x00"
        self.spooled[mark] = self._spool
        self._spool = None
        self.skeleton += json.dumps(mark)[1:].encode("ascii")


def read_long_line(source: IO[bytes], first: bytes) -> LongLine:
    """The rest of a line whose first ``first`` bytes were read, read in pieces."""
    line = LongLine()
    piece = first
    while True:
        line.feed(piece)
        if piece.endswith(b"\n") or not piece:
            return line
        piece = source.readline(PIECE)
