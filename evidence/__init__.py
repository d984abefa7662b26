"""What people read in recordings: documents, and what replay changes in recorded bytes.

Every reader of recordings (the CLI, the admin API, the case file) goes through here, so they
agree field for field. It sits above ``canonicalize`` and ``storage`` and knows nothing of
mitmproxy or of the running process.
"""

from evidence.document import (
    cassette_document,
    exchange_document,
    miss_document,
    search_document,
    summary_document,
)

__all__ = [
    "cassette_document",
    "exchange_document",
    "miss_document",
    "search_document",
    "summary_document",
]
