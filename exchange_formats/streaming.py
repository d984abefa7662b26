"""Bodies too large to hold, written into a JSON document as it is written out.

A document is built with a mark where such a body goes (a JSON string no body can produce,
since JSON escapes NUL), serialized, and written out piece by piece: the text up to a mark,
then the body read from the store part by part as a JSON string of its text or its base64,
then on. So a 1 GB body passes through in parts of the store's size, never whole.
"""

from __future__ import annotations

import base64
import codecs
import json
from typing import IO

from freezeframe.storage import BlobRef, ReadStore


class Streamed:
    """The bodies one document names by mark, and how to write it with them in place."""

    def __init__(self, store: ReadStore) -> None:
        self._store = store
        self._marks: dict[str, tuple[BlobRef, bool]] = {}

    def is_text(self, ref: BlobRef) -> bool:
        """Whether the body is valid UTF-8, read through once."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            for piece in self._store.read_blob(ref):
                decoder.decode(piece)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
        return True

    def mark(self, ref: BlobRef, text: bool) -> str:
        """The string to put in the document where the body goes, as text or base64."""
        mark = f"\x00body{len(self._marks)}\x00"
        self._marks[json.dumps(mark)] = (ref, text)
        return mark

    def write(self, document: str, out: IO[bytes]) -> None:
        """``document`` (serialized) with each mark replaced by its body."""
        for mark, (ref, text) in self._marks.items():
            before, document = document.split(mark, 1)
            out.write(before.encode("utf-8"))
            self._body(ref, text, out)
        out.write(document.encode("utf-8"))
        self._marks.clear()

    def _body(self, ref: BlobRef, text: bool, out: IO[bytes]) -> None:
        out.write(b'"')
        if text:
            decoder = codecs.getincrementaldecoder("utf-8")()
            for piece in self._store.read_blob(ref):
                out.write(json.dumps(decoder.decode(piece), ensure_ascii=False)[1:-1].encode())
        else:
            rest = b""
            for piece in self._store.read_blob(ref):
                data = rest + piece
                whole = len(data) - len(data) % 3
                out.write(base64.b64encode(data[:whole]))
                rest = data[whole:]
            out.write(base64.b64encode(rest))
        out.write(b'"')
