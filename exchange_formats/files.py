"""What ``exchange_formats`` offers: export to a file, import from one, send spans, keys.

The package's ``__init__`` names these lazily (see there); this module holds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from freezeframe.evidence.inert import inert
from freezeframe.evidence.triage import signed_imports
from freezeframe.exchange_formats import SHAPES
from freezeframe.exchange_formats.bundle import (
    BundleReport,
    bundle_notes,
    export_bundle,
    read_bundle,
    verify_bundle,
)
from freezeframe.exchange_formats.captured import Keeper
from freezeframe.exchange_formats.dataset import export_dataset
from freezeframe.exchange_formats.errors import FormatError
from freezeframe.exchange_formats.har import export_har, read_har
from freezeframe.exchange_formats.jsonl import Progress, export_jsonl, jsonl_notes, read_jsonl
from freezeframe.exchange_formats.otel import export_otel, post_to, write_lines
from freezeframe.exchange_formats.signing import keygen, load_private
from freezeframe.storage import ForkOrigin, Imported, ImportedCassette, Note, ReadStore, Store
from freezeframe.storage.filemode import open_private
from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name

__all__ = [
    "BundleReport",
    "FormatError",
    "Keeper",
    "Opened",
    "Progress",
    "bundle_lines",
    "export_cassette",
    "export_line",
    "import_file",
    "keygen",
    "open_import",
    "send_otel",
    "verify_bundle",
]


def export_cassette(
    store: ReadStore,
    cassette: str,
    path: Path,
    format: str,
    *,
    key: Path | None = None,
    rules: Path | None = None,
    shape: str = SHAPES[0],
    progress: Progress = lambda _: None,
) -> BundleReport | int:
    """Write ``cassette`` to ``path`` in ``format``: the bundle's report, or how many
    exchanges (otel: spans; dataset: rows) were written. The file appears whole or not at
    all: it is written beside ``path`` and renamed over it at the end."""
    if key is not None and format != "bundle":
        raise ValueError("--sign signs a bundle: add --format bundle")
    if shape != SHAPES[0] and format != "dataset":
        raise ValueError("--shape shapes a dataset: add --format dataset")
    private = load_private(key) if key is not None else None
    store.exchanges(cassette)  # CassetteNotFound before any file is made
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open_private(partial) as out:
            written: BundleReport | int
            if format == "bundle":
                written = export_bundle(store, cassette, out, private, rules, progress)
            elif format == "har":
                written = export_har(store, cassette, out, progress)
            elif format == "otel":
                written = export_otel(store, cassette, write_lines(out), progress)
            elif format == "dataset":
                written = export_dataset(store, cassette, out, shape, progress)
            else:
                written = export_jsonl(store, cassette, out, progress)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return written


def send_otel(
    store: ReadStore, cassette: str, endpoint: str, progress: Progress = lambda _: None
) -> int:
    """POST the cassette's spans to a collector's OTLP/HTTP endpoint; returns the spans."""
    store.exchanges(cassette)  # CassetteNotFound before anything is sent
    with post_to(endpoint) as send:
        return export_otel(store, cassette, send, progress)


@dataclass(frozen=True)
class Opened:
    """A file about to be imported."""

    format: str
    cassette: str
    """``--as NAME``, or the name the file gives (its own, or for a capture its stem)."""
    exchanges: Iterator[Imported]
    """Read lazily, as the store writes them."""
    total: int | None
    """How many exchanges there are, where the file says so up front."""
    notes: list[str] = field(default_factory=list)
    """What the file did not have, one line per kind; complete once ``exchanges`` is."""
    origin: ForkOrigin | None = None
    """What the exported cassette was forked from, to import it as a fork of the same."""
    case_notes: list[Note] = field(default_factory=list)
    """The exported cassette's case notes, for the cassette it is imported as."""


def open_import(path: Path, cassette: str | None, keeper: Callable[[str], Keeper]) -> Opened:
    """``path`` opened as the format its first bytes show; ``keeper(cassette)`` redacts and
    keys a capture's exchanges (HAR, flows). Raises FormatError for a file no format reads,
    or whose start is not what its format needs."""
    with open(path, "rb") as probe:
        start = probe.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith(b"PK"):
        name, items, total, signed_by, origin = read_bundle(path, cassette)
        signer = (
            []
            if signed_by is None
            else [
                f"signed by {signed_by}: check that it is a key you trust with "
                "freezeframe verify --bundle FILE --trust NAME.pub"
            ]
        )
        kept = bundle_notes(path, name)
        return Opened("bundle", name, signed_imports(items), total, signer, origin, kept)
    if start.startswith(b"{") and b"freezeframe.jsonl" in _first_line(path):
        name, items, origin = read_jsonl(path, cassette)
        kept = jsonl_notes(path, name)
        return Opened("jsonl", name, signed_imports(items), None, [], origin, kept)
    name = cassette or path.stem
    notes: list[str] = []
    if start.startswith(b"{"):
        return Opened("har", name, signed_imports(read_har(path, keeper(name), notes)), None, notes)
    if start[:1].isdigit():
        # mitmproxy reads its own flow files; the other formats never import it, so that
        # export and import of freezeframe's formats start at once.
        from freezeframe.exchange_formats.flows import read_flows

        read = read_flows(path, keeper(name), notes)
        return Opened("flows", name, signed_imports(read), None, notes)
    raise FormatError(
        path, "start", "not a file freezeframe imports (jsonl, bundle, HAR, mitmproxy flows)"
    )


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as source:
        return source.readline(4096)


def import_file(
    path: Path,
    name: str | None,
    keeper: Callable[[str], Keeper],
    store: Callable[[], tuple[Store, bool]],
    progress: Callable[[int | None], AbstractContextManager[Progress]],
) -> tuple[Opened, ImportedCassette, str | None]:
    """``freezeframe import``: ``path`` read as ``open_import`` reads it and written as a
    new cassette (``name``, else the file's), in one transaction, into the store ``store``
    opens (and says whether it made); what was read, what was written and where the store
    was made (None: it was there). ``progress(total)`` gives the counter each exchange
    written advances."""
    source = open_import(path, name, keeper)
    try:
        validate_cassette_name(source.cassette)
    except InvalidCassetteName as exc:
        raise InvalidCassetteName(f"{exc}; name the cassette with --as NAME") from None
    opened, made = store()
    with opened, progress(source.total) as advance:
        imported = opened.import_cassette(
            source.cassette,
            _counted(source.exchanges, advance),
            origin=source.origin,
            notes=source.case_notes,
        )
    return source, imported, opened.location if made else None


def _counted[T](items: Iterable[T], advance: Progress) -> Iterator[T]:
    for item in items:
        yield item
        advance(1)


def export_line(output: Path, format: str, written: BundleReport | int) -> str:
    """What ``export`` says of the file it wrote."""
    if isinstance(written, BundleReport):
        signed = f", signed by {written.signed_by}" if written.signed_by else ""
        return inert(
            f"{output}: {written.exchanges} exchanges, {written.bodies} bodies{signed}; "
            f"chain head {written.chain_head}, merkle root {written.merkle_root}",
            newlines=False,
        )
    unit = {"otel": "spans", "dataset": "rows"}.get(format, "exchanges")
    return inert(f"{output}: {written} {unit}", newlines=False)


def bundle_lines(path: Path, report: BundleReport) -> Iterator[str]:
    """What ``verify --bundle`` says of an intact bundle, and whose signature it bears."""
    if report.signed_by is None:
        signed = "not signed"
    elif report.trusted:
        signed = f"signed by trusted key {report.signed_by}"
    else:
        signed = f"signed by {report.signed_by} (not checked against a key: pass --trust)"
    yield inert(
        f"{path}: intact: cassette {report.cassette!r}, {report.exchanges} exchanges, "
        f"{report.bodies} bodies; {signed}",
        newlines=False,
    )
    yield f"  chain head {report.chain_head}, merkle root {report.merkle_root}"
