"""The values that cross the store's boundary: frozen dataclasses, never rows.

Everything a caller hands to a store or gets back from one is defined here, so
callers depend on these shapes and not on SQLAlchemy. Headers stay raw bytes with
their order and duplicates, and bodies stay exactly as they crossed the wire,
because replay must give a client back the bytes it would have received. A body
too large to hold in memory crosses as a BlobRef instead, and its bytes are
streamed through the store (Store.blob_writer, Store.read_blob).
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # encodings imports Header from here
    from freezeframe.storage.encodings import Decoded

Header = tuple[bytes, bytes]
"""One raw header line: name and value as received, order and duplicates kept."""

_DEFAULT_PORTS = {"http": 80, "https": 443}

FactValue = str | int | float | bool | None | Mapping[str, int] | Mapping[str, str]
"""One fact's value: text, a number, a flag, token counts (usage) or header values
(rate_limits), or None when the exchange does not say."""

FACT_KINDS: Mapping[str, str] = {
    "provider": "text",
    "api": "text",
    "model": "text",
    "answered_model": "text",
    "temperature": "float",
    "top_p": "float",
    "seed": "int",
    "max_tokens": "int",
    "stream": "bool",
    "system_fingerprint": "text",
    "response_id": "text",
    "request_id": "text",
    "usage": "counts",
    "finish_reason": "text",
    "rate_limits": "labels",
    "trace_id": "text",
    "parent_span_id": "text",
}
"""Each fact's kind, which fixes its column: text, float, int, bool, counts
(Mapping[str, int]) or labels (Mapping[str, str]). The names are canonicalize.FACT_NAMES, in
its order (tests/evidence/test_fact_names.py fails when they disagree)."""

FACT_NAMES: tuple[str, ...] = tuple(FACT_KINDS)
"""Every fact an exchange may carry: what it asked of a model API and what it got back,
derived from its raw bytes by the caller and kept for listing and filtering."""

INT64 = range(-(2**63), 2**63)
"""The integers a fact column holds; a fact outside it is stored as unknown (None)."""


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
    CLIENT_CLOSED = "client_closed"
    """The client closed before the answer ended, having read what it wanted (an MCP client
    closes each POST's SSE answer once its result came). The upstream cut nothing, so this
    is no failure: what arrived is kept, and replay serves it and ends it cleanly."""


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
class Message:
    """One WebSocket message, as it crossed the proxy."""

    from_client: bool
    text: bool
    """The opcode: text (True) or binary (False)."""
    at: float
    """Seconds since the exchange's request started."""
    data: bytes
    """The exact payload; a text message as its UTF-8 bytes."""


@dataclass(frozen=True, slots=True)
class Drift:
    """One replay that served this exchange to a request whose stripped parts differed."""

    at: float
    """Epoch seconds."""
    paths: tuple[str, ...]
    """The stripped parts that differed, such as "body:$.user"."""
    context: Mapping[str, str]
    """The live request's run context (its X-Freezeframe-* headers)."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an exchange came from, when it is not a recording of the wire as it stands.

    The chain covers it, so a copy says for good what it was copied from: the source's
    cassette and seq, and the source exchange's own chain value at the time.
    """

    kind: str
    """``replayed`` (served from ``cassette`` to a replay that recorded the new run into
    this one), ``forked`` (copied by a fork), ``edited`` (copied with its answer changed),
    or ``resent`` (its request sent upstream again; the answer is the new one)."""
    cassette: str
    seq: int
    chain: str
    """The source exchange's chain value: the exchange exactly as it was."""
    changes: tuple[str, ...] = ()
    """For an edited exchange: what was changed, one line each."""


@dataclass(frozen=True, slots=True)
class Signals:
    """What triage reads of an exchange, worked out when it was recorded or imported
    (evidence.signatures) and stored with it, so that triage never reads a body.

    Derived, like facts: not chained, and computed again under a newer ``version``."""

    version: int
    """The version of the rules that computed them."""
    kind: str | None
    """The failure kind; None when the exchange itself shows no failure."""
    signature: str | None
    """The failure, one line a person can read, its variable parts masked."""
    trace: str | None
    """A model call's trace for run-level readings (evidence.signatures.Trace); None for
    other calls."""
    run_failures: str | None = None
    """The failures only the run shows, found when this exchange came (a loop's third call,
    the call that dropped context, the call that went on past a tool's error), one a line
    (evidence.triage.RunReaders); None when none."""


class TriageRow(NamedTuple):
    """One exchange as triage reads it: where, when, in which run, and its signals. A
    named tuple: triage reads one per model call of a store, so it is made cheaply."""

    cassette: str
    seq: int
    run_id: str | None
    started_at: float
    kind: str | None
    signature: str | None
    trace: str | None
    run_failures: str | None


@dataclass(frozen=True, slots=True)
class Note:
    """A case note: a ticket, a verdict, a lead, on a cassette or one of its exchanges."""

    cassette: str
    seq: int | None
    """The exchange it is about; None for the whole cassette."""
    at: float
    """When it was written, epoch seconds."""
    text: str


@dataclass(frozen=True, slots=True)
class RecheckResult:
    """The last ``recheck`` of a failure group, kept for the case file's triage page."""

    signature: str
    at: float
    """When it ended, epoch seconds."""
    document: str
    """``recheck --json``'s document, as JSON text: the store keeps it, the reader reads it."""


@dataclass(frozen=True, slots=True)
class TapeRecord:
    """What the last replay of a cassette left of its tape (evidence.tape): the recorded
    exchanges it never asked for, and those it was answered out of recorded order."""

    cassette: str
    at: float
    """When the replay ended, epoch seconds."""
    document: str
    """evidence.tape.Tape.document() as JSON text."""


@dataclass(frozen=True, slots=True)
class ToRead:
    """What the store's writer needs to read an exchange's facts and triage's signals
    itself, handed over with the exchange so the proxy's event loop does not read them.

    The bodies are those the proxy decoded anyway (to key the request, to redact the
    answer), already redacted, so the writer neither decodes them again nor sees a
    secret: the same bytes object as the stored body when nothing had to be decoded,
    which pickling to the writer process sends once.
    """

    profile: str | None
    """The key's profile (canonicalize's ``Canonical.profile``), which names the API."""
    request_body: bytes
    """The request's body content-decoded, as keyed."""
    answer: "Decoded | None" = None
    """The answer's body content-decoded, when the proxy had it so."""


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
    stripped: Mapping[str, str] | None = field(default_factory=dict)
    """The parts the key left out, each as a 16-hex digest of its value (part -> digest),
    so that a later replay can tell whether they drifted; None when they were not kept (an
    exchange written before schema version 4, read back), which is stored as nothing
    stripped."""
    facts: Mapping[str, FactValue] = field(default_factory=dict)
    """What the exchange says about the model API it used, by names from FACT_NAMES (see
    FACT_KINDS for each one's type); submit() raises ValueError for an unknown name or a
    value of the wrong type. An integer outside INT64 or a float that is not finite is
    stored as unknown."""
    messages: tuple[Message, ...] | None = None
    """The WebSocket messages, in the order they crossed; None when not a WebSocket."""
    origin: Origin | None = None
    """Set for an exchange copied from another (see Origin); None for one recorded."""
    signals: Signals | None = None
    """What triage reads of it (evidence.signatures.with_signals); None: not worked out
    yet (``freezeframe triage --rebuild`` does it later)."""
    to_read: ToRead | None = None
    """Set when ``facts`` and ``signals`` are still to be read, by the store's writer
    (open_store's ``reader``): the proxy's recordings. A store opened without a reader
    stores such an exchange without them."""

    @property
    def url(self) -> str:
        return format_url(self.scheme, self.host, self.port, self.path)


@dataclass(frozen=True, slots=True)
class Exchange:
    """A recorded exchange as read back: what was submitted, and what storing it added.

    The submitted exchange is held whole, as hishel's CompletePair holds the request it
    completes, so each of its fields is declared once, in NewExchange. A copy of an exchange
    (recheck's extracted run, a perturbed answer) is ``recorded`` with its cassette, slot or
    answer changed (dataclasses.replace), never its fields copied one by one.
    """

    recorded: NewExchange
    """What was submitted, as stored: its slot is where it sits in its cassette. Its
    ``stripped`` is None for an exchange written before schema version 4 (and not rekeyed
    since), whose stripped parts were never kept; its ``facts`` are those that are known
    (not None); a body too large to load is a reference (``request_body_ref``, the
    response's ``body_ref``); and its ``signals`` are not read back (None): triage reads
    them from the store (Store.triage_rows)."""
    chain: str
    """Hex digest linking this exchange to the one written before it (see storage.chain)."""
    drift: tuple[Drift, ...] = ()
    """The drift noted on replays, oldest first; always () from lookup(), which the
    replay path calls and which has no use for them."""

    @property
    def seq(self) -> int:
        """0-based position in its cassette: how readers name an exchange."""
        return self.recorded.slot.seq

    @property
    def url(self) -> str:
        return self.recorded.url


@dataclass(frozen=True, slots=True)
class Imported:
    """One exchange brought in from a file, as it was recorded elsewhere (Store.import_cassette).

    Its slot keeps the seq and occurrence it had, so the imported cassette replays in the same
    order. A body too large to hold in memory is named by a BlobRef in the exchange and read
    from its source by one of ``streams``, piece by piece, when the import writes it.
    """

    exchange: NewExchange
    drift: tuple[Drift, ...] = ()
    streams: tuple[tuple[BlobRef, Callable[[], Iterable[bytes]]], ...] = ()
    """Each body the exchange names by BlobRef, with a function that reads it from the file;
    a body whose bytes do not match its reference fails the import."""


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """What a forked cassette was made from (Store.fork); its chain starts from a link over
    this, so an export carries it and an import gives it back (Store.fork_origin)."""

    cassette: str
    upto: int | None
    """The last seq copied, or None for every one."""
    head: str
    """The source's chain head when it was forked."""


@dataclass(frozen=True, slots=True)
class ImportedCassette:
    """A cassette written by Store.import_cassette."""

    cassette: str
    exchanges: int
    head: str
    """The chain head of the new cassette, which is chained afresh under its own name."""


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
    facts: Mapping[str, FactValue] = field(default_factory=dict)
    """The facts that are known (not None), by name."""
    drifted: int = 0
    """How many replays noted drift on this exchange."""
    websocket_messages: int | None = None
    """How many WebSocket messages it holds; None when not a WebSocket."""
    origin: str | None = None
    """The kind of its Origin (``replayed``, ``forked``, ``edited``, ``resent``), if any."""
    first_byte_after: float | None = None
    """Seconds from the request's start to the answer's first byte; None without an answer."""


@dataclass(frozen=True, slots=True)
class ExchangeFilter:
    """Which exchanges a listing keeps: those matching every criterion given."""

    run_id: str | None = None
    """The run-id of the exchange's context."""
    model: str | None = None
    """The model asked for or the model that answered."""
    status: int | str | None = None
    """An HTTP status (429), or an Outcome value ("truncated")."""
    host: str | None = None
    """The host the request went to (a name, without the port)."""

    def __post_init__(self) -> None:
        if isinstance(self.status, str) and self.status not in set(Outcome):
            outcomes = ", ".join(outcome.value for outcome in Outcome)
            raise ValueError(f"status {self.status!r} is no outcome; use one of {outcomes}")

    @classmethod
    def parse(
        cls,
        run_id: str | None = None,
        model: str | None = None,
        status: str | None = None,
        host: str | None = None,
    ) -> "ExchangeFilter | None":
        """A filter from text as a user types it (``status`` "429" or "truncated"); None
        when nothing is asked. Raises ValueError naming a status that is neither."""
        if run_id is None and model is None and status is None and host is None:
            return None
        wanted: int | str | None = None
        if status is not None:
            text = status.strip().lower()
            if text.isdigit() and 100 <= int(text) <= 999:
                wanted = int(text)
            elif text in set(Outcome):
                wanted = text
            else:
                outcomes = ", ".join(outcome.value for outcome in Outcome)
                raise ValueError(
                    f"status {status!r}: use an HTTP status such as 429 or an outcome: {outcomes}"
                )
        return cls(run_id=run_id, model=model, status=wanted, host=host)


@dataclass(frozen=True, slots=True)
class Rekeyed:
    """What a rekey callback returns for one exchange: its key as computed now."""

    key: str
    key_scheme: int
    canonical: bytes
    stripped: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class KeyChange:
    """Where a rekey moved one exchange: old and new key and occurrence (equal if unchanged)."""

    seq: int
    old_key: str
    new_key: str
    old_occurrence: int
    new_occurrence: int


@dataclass(frozen=True, slots=True)
class Edit:
    """The answer an edited fork gives instead of the recorded one (Store.fork)."""

    response: RecordedResponse
    facts: Mapping[str, FactValue]
    """The metadata of the new answer, worked out by the caller as for a recording."""
    changes: tuple[str, ...]
    """What was changed, one line each, for show and the case file to say."""
    messages: tuple[Message, ...] | None = None
    """A WebSocket's messages as edited; None keeps the recorded ones. With them, the
    recorded outcome and ending (the close) are kept too: the session ends as it did."""


@dataclass(frozen=True, slots=True)
class Forked:
    """A cassette made from another one's exchanges (Store.fork)."""

    cassette: str
    source: str
    exchanges: int
    upto: int | None
    """The last seq copied, or None for every one."""
    head: str


@dataclass(frozen=True, slots=True)
class CassetteSummary:
    """One line of the cassette list."""

    name: str
    exchanges: int
    first_at: float | None
    last_at: float | None
    stored_bytes: int
    """Compressed size of the bodies (and WebSocket transcripts) the cassette uses, each
    distinct one counted once."""
    failed: int | None = None
    """Its exchanges that failed, as RunOverview.failed counts them; None in a filtered
    listing, which does not count them."""


@dataclass(frozen=True, slots=True)
class RunOverview:
    """A run's figures, counted in the store: what the top of a waterfall says without
    listing every exchange (Store.overview)."""

    exchanges: int
    by_outcome: Mapping[str, int]
    drifted: int
    """Drift notes on its exchanges, all together."""
    by_origin: Mapping[str, int]
    """Exchanges by the kind of their Origin (``replayed``, ``forked``, ``edited``, ...)."""
    hosts: tuple[str, ...]
    """Every host it went to, sorted."""
    first_at: float | None
    """When the first exchange started (epoch seconds)."""
    last_end: float | None
    """When the last one ended."""
    failed: int = 0
    """Exchanges that failed: an error status (400 and up), or an answer that was cut off,
    never came, or was in flight when the proxy stopped."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """An exchange that holds a value matching a search."""

    cassette: str
    seq: int
    method: str
    url: str
    status: int | None
    outcome: str
    started_at: float
    parts: tuple[str, ...]
    """Where it holds a match: ``request``, ``response``, ``metadata``."""
    match: str
    """A matching value, cut around the match when long."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One JSON path at which a missed request differs from a recorded one."""

    path: str
    live: str
    recorded: str


@dataclass(frozen=True, slots=True)
class Nearest:
    """A recorded request offered as nearest to a missed one, with where they differ."""

    seq: int
    request: str
    key: str
    differences: tuple[Difference, ...]


@dataclass(frozen=True, slots=True)
class Miss:
    """A request replay had no recording for, as its client was answered."""

    cassette: str
    at: float
    """Epoch seconds."""
    kind: str
    """``freezeframe_replay_miss``, or ``freezeframe_unknown_cassette``."""
    method: str
    url: str
    key: str
    occurrence: int
    """1-based: which occurrence of its key this request was."""
    recorded: int
    """How many recordings of its key the cassette has (all already served when > 0)."""
    message: str
    context: Mapping[str, str]
    nearest: tuple[Nearest, ...] = ()


@dataclass(frozen=True, slots=True)
class Collected:
    """What garbage collection found (and, unless a dry run, deleted)."""

    bodies: int
    """Bodies, canonical forms and transcripts no exchange names."""
    freed: int
    """Their compressed size in bytes."""
    values: int
    """Search values no exchange holds."""
    objects: int = 0
    """Objects in object storage (--blobs) that no body row names, older than the grace."""


@dataclass(frozen=True, slots=True)
class Removed:
    """What removing a cassette took out of the store."""

    cassette: str
    exchanges: int
    bodies: int
    """Bodies (and canonical forms and transcripts) that no other cassette used."""
    freed: int
    """Their compressed size in bytes."""


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
    head: str | None = None
    """The chain value the cassette ends at, as recomputed: write it into a ticket at
    incident time, and a later verify that reports the same head shows nothing changed."""
    provenance: tuple[str, ...] = ()
    """For a fork: what it was forked from, and whether the source, where this store has
    it, still holds those exchanges unchanged."""


def format_url(scheme: str, host: str, port: int, path: str) -> str:
    """scheme://host[:port]path, with the port left out when it is the scheme's default."""
    netloc = f"[{host}]" if ":" in host else host
    if _DEFAULT_PORTS.get(scheme) != port:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}{path}"


def check_facts(facts: Mapping[str, FactValue]) -> None:
    """Raise ValueError for a fact with an unknown name or a value of the wrong kind."""
    for name, value in facts.items():
        kind = FACT_KINDS.get(name)
        if kind is None:
            raise ValueError(f"unknown fact {name!r}; facts are {', '.join(FACT_NAMES)}")
        if value is not None and not _is_kind(kind, value):
            raise ValueError(f"fact {name!r} must be {_KIND_NAMES[kind]}, not {value!r:.60}")


_KIND_NAMES = {
    "text": "a str",
    "float": "a number",
    "int": "an int",
    "bool": "a bool",
    "counts": "a mapping of str to int",
    "labels": "a mapping of str to str",
}


def _is_kind(kind: str, value: object) -> bool:
    match kind:
        case "text":
            return isinstance(value, str)
        case "float":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "int":
            return isinstance(value, int) and not isinstance(value, bool)
        case "bool":
            return isinstance(value, bool)
        case "counts":
            return isinstance(value, Mapping) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in value.items()
            )
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
