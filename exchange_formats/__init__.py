"""Cassettes as files that travel: export to and import from portable formats.

Each format is one module, a reader or writer of the store's records: ``jsonl``
(freezeframe's own lossless form), ``bundle`` (a signed case file), ``har`` (HAR 1.2),
``flows`` (mitmproxy's flow files, import only), ``otel`` (OTLP traces) and ``dataset`` (eval
rows), the last two export only. Exports read through a ReadStore and evidence's read
model; imports write through WriteStore.import_cassette, in one transaction, so no format
knows SQL.
``open_import`` tells the formats apart by their first bytes.
"""

from __future__ import annotations

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freezeframe.exchange_formats.files import (
        BundleReport,
        FormatError,
        Keeper,
        Opened,
        Progress,
        bundle_lines,
        export_cassette,
        export_line,
        import_file,
        keygen,
        open_import,
        send_otel,
        verify_bundle,
    )

__all__ = [
    "EXPORT_FORMATS",
    "SHAPES",
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

EXPORT_FORMATS = ("jsonl", "bundle", "har", "otel", "dataset")
"""The values of ``export --format``, the default first."""
SHAPES = ("freezeframe", "braintrust", "langfuse", "phoenix", "openai-chat")
"""The values of ``export --shape``: whose field names a dataset row uses."""


def __getattr__(name: str) -> Any:
    """The rest loads when first used: cryptography and mitmproxy's flow reader take about
    0.6 s to import, which every start of the proxy (``freezeframe run`` loads the whole
    command line) would pay otherwise."""
    if name in __all__:
        return getattr(importlib.import_module(".files", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
