"""Case notes as people write and read them: the ``CASSETTE[:SEQ]`` they name, and their
documents for ``show``, ``search`` and the case file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from freezeframe.storage import Note


def note_target(target: str) -> tuple[str, int | None]:
    """``CASSETTE`` or ``CASSETTE:SEQ`` read: the cassette, and the seq when one is given.
    A name that itself holds a colon is read whole unless what follows the last colon is
    a number."""
    cassette, colon, seq = target.rpartition(":")
    if colon and cassette and seq.isdigit():
        return cassette, int(seq)
    return target, None


def note_document(note: Note) -> dict[str, Any]:
    return {"cassette": note.cassette, "seq": note.seq, "at": note.at, "text": note.text}


def note_hit(note: Note) -> dict[str, Any]:
    """A note found by ``search --json``, in a search hit's shape: ``parts`` is ``["note"]``
    and the request's fields are null (a note is about an exchange, not one)."""
    return {
        "cassette": note.cassette,
        "seq": note.seq,
        "method": None,
        "url": None,
        "status": None,
        "outcome": None,
        "started_at": note.at,
        "parts": ["note"],
        "match": note.text,
    }


def with_notes(document: dict[str, Any], notes: Sequence[Note]) -> dict[str, Any]:
    """An exchange's document (``show CASSETTE SEQ --json``, the admin API, the case file's
    twin) with the case notes on it, so that all three say the same."""
    return {**document, "notes": [note_document(n) for n in notes]}
