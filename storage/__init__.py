"""Where recordings live: cassettes of exchanges behind the Store interface.

Nothing here knows about mitmproxy or how request keys are made: keys and
canonical forms are opaque. Callers see frozen records, never rows.
"""

from storage.base import BlobWriter, Store
from storage.errors import (
    CassetteNotFound,
    ExchangeNotFound,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreUnavailable,
)
from storage.open import open_store
from storage.records import (
    BlobRef,
    Candidate,
    CassetteSummary,
    Chunk,
    Exchange,
    ExchangeSummary,
    Header,
    NewExchange,
    Outcome,
    RecordedResponse,
    Slot,
    VerifyReport,
)

__all__ = [
    "BlobRef",
    "BlobWriter",
    "Candidate",
    "CassetteNotFound",
    "CassetteSummary",
    "Chunk",
    "Exchange",
    "ExchangeNotFound",
    "ExchangeSummary",
    "Header",
    "NewExchange",
    "Outcome",
    "RecordedResponse",
    "SchemaTooNew",
    "Slot",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "VerifyReport",
    "open_store",
]
