"""Where recordings live: cassettes of exchanges behind the Store interface
and its roles (storage.base).

Nothing here knows about mitmproxy or how request keys are made: keys and
canonical forms are opaque. Callers see frozen records, never rows.
"""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

from freezeframe.storage.base import Store
from freezeframe.storage.errors import (
    CassetteNotFound,
    ExchangeNotFound,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
)
from freezeframe.storage.open import open_store
from freezeframe.storage.reading import ReadStore
from freezeframe.storage.recording import BlobWriter, RecordStore
from freezeframe.storage.records import (
    FACT_NAMES,
    BlobRef,
    Candidate,
    CassetteSummary,
    Chunk,
    Collected,
    Difference,
    Drift,
    Edit,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    FactValue,
    Forked,
    ForkOrigin,
    Header,
    Imported,
    ImportedCassette,
    KeyChange,
    Message,
    Miss,
    Nearest,
    NewExchange,
    Note,
    Origin,
    Outcome,
    RecheckResult,
    RecordedResponse,
    Rekeyed,
    Removed,
    RunOverview,
    SearchHit,
    Signals,
    Slot,
    TapeRecord,
    ToRead,
    TriageRow,
    VerifyReport,
)
from freezeframe.storage.replaying import ReplayStore
from freezeframe.storage.stats import WriterStats
from freezeframe.storage.writing import WriteStore

__all__ = [
    "FACT_NAMES",
    "BlobRef",
    "BlobWriter",
    "Candidate",
    "CassetteNotFound",
    "CassetteSummary",
    "Chunk",
    "Collected",
    "Difference",
    "Drift",
    "Edit",
    "Exchange",
    "ExchangeFilter",
    "ExchangeNotFound",
    "ExchangeSummary",
    "FactValue",
    "ForkOrigin",
    "Forked",
    "Header",
    "Imported",
    "ImportedCassette",
    "KeyChange",
    "Message",
    "Miss",
    "Nearest",
    "NewExchange",
    "Note",
    "Origin",
    "Outcome",
    "ReadStore",
    "RecheckResult",
    "RecordStore",
    "RecordedResponse",
    "Rekeyed",
    "RunOverview",
    "Removed",
    "ReplayStore",
    "SchemaTooNew",
    "SearchHit",
    "Signals",
    "Slot",
    "TapeRecord",
    "ToRead",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "TriageRow",
    "VerifyReport",
    "WriterStats",
    "WriteStore",
    "open_store",
]
