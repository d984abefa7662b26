"""The values that cross the store's boundary: frozen dataclasses, never rows.

Everything a caller hands to a store or gets back from one is defined here, so
callers depend on these shapes and not on SQLAlchemy. Headers stay raw bytes with
their order and duplicates, and bodies stay exactly as they crossed the wire,
because replay must give a client back the bytes it would have received. A body
too large to hold in memory crosses as a BlobRef instead, and its bytes are
streamed through the store (Store.blob_writer, Store.read_blob).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

Header = tuple[bytes, bytes]
"""One raw header line: name and value as received, order and duplicates kept."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


class Outcome(StrEnum):
    """How an exchange ended, so replay can reproduce failures as well as successes."""

    COMPLETE = "complete"
    """The whole response arrived."""
    TRUNCATED = "truncated"
    """Response headers arrived, then the upstream closed or reset before the body ended."""
    FAILED = "failed"
    """No response at all: refused, reset, TLS failure or timeout."""
    INCOMPLETE = "incomplete"
    """The proxy was stopped while the exchange was in flight."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """When one piece of a response body arrived, so replay can keep the pacing."""

    offset: int
    """Byte offset of the chunk's start in the response body."""
    at: float
    """Seconds since the request started."""


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A body that stays in the store: read it with Store.read_blob(), part by part.

    Bodies too large to hold in memory are written through a Store.blob_writer()
    and read back through this reference instead of as bytes.
    """

    digest: str
    """The hex blake3 digest of the raw body, which is also its name in the store."""
    size: int
    """The body's length in bytes."""


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response as the client received it: content-encoding kept, transfer framing removed."""

    status: int
    reason: str
    http_version: str
    headers: tuple[Header, ...]
    body: bytes
    chunks: tuple[Chunk, ...]
    first_byte_at: float | None
    """Seconds from the request's start to the response's first byte."""
    trailers: tuple[Header, ...] = ()
    body_ref: BlobRef | None = None
    """Set instead of ``body`` (which is then b"") when the body lives in the store:
    when submitting, a body written through a blob writer; when reading back, one
    larger than the store loads whole (storage.blobs.INLINE_LIMIT)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """Where an exchange goes in its cassette, fixed when its request arrives.

    Reserving at arrival rather than at completion keeps the recorded order equal
    to the order the client sent requests, whatever order the answers come back in.
    """

    seq: int
    """0-based position in the cassette, by request arrival."""
    occurrence: int
    """0-based index among this cassette's requests with the same key."""


@dataclass(frozen=True, slots=True)
class NewExchange:
    """One exchange to record, already redacted of secrets by the caller."""

    cassette: str
    key: str
    key_scheme: int
    canonical: bytes
    method: str
    scheme: str
    host: str
    port: int
    path: str
    """Path including the query string, as sent."""
    http_version: str
    request_headers: tuple[Header, ...]
    request_body: bytes
    started_at: float
    """Epoch seconds."""
    duration: float | None
    """Seconds from the start to the last byte or the failure."""
    response: RecordedResponse | None
    outcome: Outcome
    error: str | None
    """How the connection ended or why it failed."""
    context: Mapping[str, str]
    """Run metadata such as {"run-id": ..., "session-id": ...}."""
    slot: Slot
    request_body_ref: BlobRef | None = None
    """Set instead of ``request_body`` (then b"") for a body written through a blob writer."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """A recorded exchange as read back: what was submitted, plus its chain link."""

    cassette: str
    seq: int
    occurrence: int
    key: str
    key_scheme: int
    canonical: bytes
    method: str
    scheme: str
    host: str
    port: int
    path: str
    http_version: str
    request_headers: tuple[Header, ...]
    request_body: bytes
    started_at: float
    duration: float | None
    response: RecordedResponse | None
    outcome: Outcome
    error: str | None
    context: Mapping[str, str]
    chain: str
    """Hex digest linking this exchange to the one written before it (see storage.chain)."""
    request_body_ref: BlobRef | None = None
    """Set instead of ``request_body`` (then b"") when the body is too large to load."""

    @property
    def url(self) -> str:
        return format_url(self.scheme, self.host, self.port, self.path)


@dataclass(frozen=True, slots=True)
class ExchangeSummary:
    """One line of a cassette listing: enough to choose an exchange, no bodies."""

    cassette: str
    seq: int
    occurrence: int
    key: str
    method: str
    url: str
    status: int | None
    outcome: Outcome
    started_at: float
    duration: float | None
    response_bytes: int
    context: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class CassetteSummary:
    """One line of the cassette list."""

    name: str
    exchanges: int
    first_at: float | None
    last_at: float | None
    stored_bytes: int
    """Compressed size of the bodies the cassette uses, each distinct body counted once."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A recorded request offered as a near miss when a live request has no recording."""

    seq: int
    occurrence: int
    key: str
    method: str
    url: str
    canonical: bytes


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The result of re-computing a cassette's hash chain."""

    cassette: str
    checked: int
    ok: bool
    first_break: int | None
    """Seq of the first exchange that does not verify; None when ok, or when
    exchanges are missing after the last one present."""
    detail: str


def format_url(scheme: str, host: str, port: int, path: str) -> str:
    """scheme://host[:port]path, with the port left out when it is the scheme's default."""
    netloc = f"[{host}]" if ":" in host else host
    if _DEFAULT_PORTS.get(scheme) != port:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}{path}"
