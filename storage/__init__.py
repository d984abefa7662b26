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
    StoreNotFound,
    StoreUnavailable,
)
from storage.open import open_store
from storage.records import (
    FACT_NAMES,
    BlobRef,
    Candidate,
    CassetteSummary,
    Chunk,
    Drift,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    FactValue,
    Header,
    KeyChange,
    Message,
    NewExchange,
    Outcome,
    RecordedResponse,
    Rekeyed,
    Removed,
    Slot,
    VerifyReport,
)

__all__ = [
    "FACT_NAMES",
    "BlobRef",
    "BlobWriter",
    "Candidate",
    "CassetteNotFound",
    "CassetteSummary",
    "Chunk",
    "Drift",
    "Exchange",
    "ExchangeFilter",
    "ExchangeNotFound",
    "ExchangeSummary",
    "FactValue",
    "Header",
    "KeyChange",
    "Message",
    "NewExchange",
    "Outcome",
    "RecordedResponse",
    "Rekeyed",
    "Removed",
    "SchemaTooNew",
    "Slot",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "VerifyReport",
    "open_store",
]
