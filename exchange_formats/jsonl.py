"""freezeframe's own portable form: a header line, then one exchange document a line.

Keys are sorted and nothing in a line depends on when it was exported, so exporting a
cassette twice gives the same file and a cassette kept in git diffs line by line. A body the
store keeps out of memory is written into its line piece by piece, never held whole, and a
line too long to hold is read back in pieces (exchange_formats.longlines).
``schema/jsonl.schema.json`` describes every line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from freezeframe.exchange_formats.errors import FormatError
from freezeframe.exchange_formats.longlines import SPOOL_ABOVE, read_long_line
from freezeframe.exchange_formats.portable import (
    FORMAT_VERSION,
    BodyReader,
    DocumentError,
    Reading,
    Spooled,
    bytes_document,
    exchange_document,
    kind_of,
    origin_document,
    read_origin,
    ref_document,
)
from freezeframe.exchange_formats.streaming import Streamed
from freezeframe.storage import (
    BlobRef,
    Exchange,
    ForkOrigin,
    Imported,
    Note,
    ReadStore,
    boundedjson,
)

FORMAT = "freezeframe.jsonl"

Progress = Callable[[int], None]
"""Told how many more exchanges are done."""


def header(cassette: str, origin: ForkOrigin | None, notes: Sequence[Note] = ()) -> dict[str, Any]:
    """The first line: the format, and the cassette with, for a fork, what it came from,
    and its case notes when it has any."""
    found: dict[str, Any] = {
        "cassette": cassette,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
    }
    if origin is not None:
        found["origin"] = origin_document(origin)
    if notes:
        found["notes"] = notes_document(notes)
    return found


def notes_document(notes: Sequence[Note]) -> list[dict[str, Any]]:
    """Case notes as an export carries them (the cassette is the file's own)."""
    return [{"seq": n.seq, "at": n.at, "text": n.text} for n in notes]


def read_notes(found: object, cassette: str) -> list[Note]:
    """An export's case notes, for the cassette it is imported as; DocumentError naming
    the note that is not one."""
    if found is None:
        return []
    if not isinstance(found, list):
        raise DocumentError("$.notes", f"expected a list, found {kind_of(found)}")
    notes = []
    for index, item in enumerate(found):
        where = f"$.notes[{index}]"
        if not isinstance(item, dict):
            raise DocumentError(where, f"expected an object, found {kind_of(item)}")
        seq, at, text = item.get("seq"), item.get("at"), item.get("text")
        if not (seq is None or (isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0)):
            raise DocumentError(f"{where}.seq", "expected a seq (a number from 0) or null")
        if not isinstance(at, int | float) or isinstance(at, bool):
            raise DocumentError(f"{where}.at", "expected a number (epoch seconds)")
        if not isinstance(text, str):
            raise DocumentError(f"{where}.text", f"expected a string, found {kind_of(text)}")
        notes.append(Note(cassette, seq, float(at), text))
    return notes


def jsonl_notes(path: Path, cassette: str) -> list[Note]:
    """The case notes in a jsonl export's header, for the cassette it is imported as."""
    with open(path, "rb") as source:
        first = source.readline()
    try:
        return read_notes(json.loads(first).get("notes"), cassette)
    except DocumentError as exc:
        raise FormatError(path, f"line 1: {exc.where}", exc.what) from None


def dumps(document: object) -> str:
    """One line of the file: keys sorted, no spaces, text kept as text."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def export_jsonl(store: ReadStore, cassette: str, out: IO[bytes], progress: Progress) -> int:
    """Write the cassette to ``out``; returns how many exchanges were written."""
    first = header(cassette, store.fork_origin(cassette), store.notes(cassette))
    out.write(dumps(first).encode("utf-8") + b"\n")
    count = 0
    for summary in store.exchanges(cassette):
        write_exchange(store, store.exchange(cassette, summary.seq), out)
        count += 1
        progress(1)
    return count


def write_exchange(store: ReadStore, exchange: Exchange, out: IO[bytes]) -> None:
    """One exchange's line; a body the store keeps out of memory is streamed into it."""
    streamed = Streamed(store)

    def body(data: bytes, ref: BlobRef | None) -> dict[str, Any]:
        if ref is None:
            return bytes_document(data)
        text = streamed.is_text(ref)
        return ref_document(ref) | {"text" if text else "base64": streamed.mark(ref, text)}

    streamed.write(dumps(exchange_document(exchange, body)), out)
    out.write(b"\n")


def read_jsonl(
    path: Path, cassette: str | None
) -> tuple[str, Iterator[Imported], ForkOrigin | None]:
    """The cassette name to import into (``cassette`` or the one the file names), its
    exchanges, read lazily, and what it was forked from. Raises FormatError naming the file,
    the line and the field."""
    source = open(path, "rb")  # noqa: SIM115 - closed by the generator below
    try:
        first = source.readline()
        found, origin = _header(path, first)
    except BaseException:
        source.close()
        raise
    name = cassette or found
    return name, _exchanges(path, source, name), origin


def _header(path: Path, line: bytes) -> tuple[str, ForkOrigin | None]:
    try:
        document = boundedjson.loads(line)
    except ValueError:
        raise FormatError(path, "line 1", "not a freezeframe jsonl header") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise FormatError(path, "line 1", f"not a {FORMAT} header")
    version = document.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise FormatError(
            path,
            "line 1",
            f"format version {version} is newer than this freezeframe reads "
            f"({FORMAT_VERSION}): upgrade freezeframe",
        )
    name = document.get("cassette")
    if not isinstance(name, str):
        raise FormatError(path, "line 1", "$.cassette: expected a string")
    try:
        return name, read_origin(document.get("origin"))
    except DocumentError as exc:
        raise FormatError(path, f"line 1: {exc.where}", exc.what) from None


def _exchanges(path: Path, source: IO[bytes], cassette: str) -> Iterator[Imported]:
    """Each line's exchange; a line longer than SPOOL_ABOVE is read in pieces, its long
    strings spooled (exchange_formats.longlines), and the spools deleted once the store has
    taken the exchange."""
    with source:
        number = 1
        while first := source.readline(SPOOL_ABOVE):
            number += 1
            if first.endswith(b"\n") or len(first) < SPOOL_ABOVE:
                if first.strip():
                    yield read_line(path, number, first, cassette, None)
                continue
            line = read_long_line(source, first)
            try:
                yield read_line(path, number, bytes(line.skeleton), cassette, None, line.spooled)
            finally:
                line.close()


def read_line(
    path: Path,
    number: int,
    line: bytes,
    cassette: str,
    bodies: BodyReader | None,
    spooled: Mapping[str, Spooled] | None = None,
) -> Imported:
    """One exchange line, as the record to import; FormatError names what is wrong."""
    where = f"line {number}"
    if not line.endswith(b"\n"):
        raise FormatError(path, where, "the line is cut off (the file is truncated)")
    try:
        document = boundedjson.loads(line)
    except ValueError as exc:
        raise FormatError(path, where, f"not JSON: {exc}") from None

    def locate(error: DocumentError) -> FormatError:
        return FormatError(path, f"{where}: {error.where}", error.what)

    try:
        return Reading(document, "$", bodies, spooled, locate).imported(cassette)
    except DocumentError as exc:
        raise locate(exc) from None
