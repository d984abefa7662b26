"""Cassettes as files that travel: export to and import from portable formats.

Each format is one module, a reader or writer of the store's records: ``jsonl`` (freezeframe's
own lossless form), ``bundle`` (a signed case file). Exports read through the Store interface
and imports write through Store.import_cassette, in one transaction, so no format knows SQL.
``import_file`` tells the formats apart by their first bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from exchange_formats.bundle import BundleReport, export_bundle, read_bundle, verify_bundle
from exchange_formats.errors import FormatError
from exchange_formats.jsonl import Progress, export_jsonl, read_jsonl
from exchange_formats.signing import keygen, load_private
from storage import Imported, Store

__all__ = [
    "EXPORT_FORMATS",
    "BundleReport",
    "FormatError",
    "Opened",
    "Progress",
    "export_cassette",
    "keygen",
    "load_private",
    "open_import",
    "verify_bundle",
]

EXPORT_FORMATS = ("jsonl", "bundle")
"""The values of ``export --format``, the default first."""


@dataclass(frozen=True)
class Opened:
    """A file about to be imported."""

    format: str
    cassette: str
    """``--as NAME``, or the name the file gives."""
    exchanges: Iterator[Imported]
    """Read lazily, as the store writes them."""
    total: int | None
    """How many exchanges there are, where the file says so up front."""


def export_cassette(
    store: Store,
    cassette: str,
    path: Path,
    format: str,
    *,
    key: Path | None = None,
    rules: Path | None = None,
    progress: Progress = lambda _: None,
) -> BundleReport | int:
    """Write ``cassette`` to ``path`` in ``format``: the bundle's report, or how many
    exchanges were written. The file appears whole or not at all: it is written beside
    ``path`` and renamed over it at the end."""
    if key is not None and format != "bundle":
        raise ValueError("--sign signs a bundle: add --format bundle")
    private = load_private(key) if key is not None else None
    store.exchanges(cassette)  # CassetteNotFound before any file is made
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "wb") as out:
            if format == "bundle":
                written: BundleReport | int = export_bundle(
                    store, cassette, out, private, rules, progress
                )
            else:
                written = export_jsonl(store, cassette, out, progress)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return written


def open_import(path: Path, cassette: str | None) -> Opened:
    """``path`` opened as the format its first bytes show. Raises FormatError for a file no
    format reads, or whose start is not what its format needs."""
    with open(path, "rb") as probe:
        start = probe.read(64)
    if start.startswith(b"PK"):
        name, items, total = read_bundle(path, cassette)
        return Opened("bundle", name, items, total)
    if start.lstrip().startswith(b"{") and b"freezeframe.jsonl" in _first_line(path):
        name, items = read_jsonl(path, cassette)
        return Opened("jsonl", name, items, None)
    raise FormatError(path, "start", "not a file freezeframe imports (jsonl, bundle)")


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as source:
        return source.readline(4096)
