"""The tables, as SQLAlchemy Core objects, the schema version guard and migrations.

One row per exchange, bodies in ``blobs`` by digest (see storage.blobs), and a
``meta`` table whose schema_version lets a newer freezeframe's store be refused
instead of misread and an older one be migrated forward when opened. Structured
fields (headers, chunks, context) are JSON text: they are only ever read whole,
together with their exchange.

Versions: 1, the first; 2 adds ``blobs.parts`` and ``blob_parts`` for bodies
streamed in parts; 3 adds ``exchanges.canonical_digest``: a request's canonical form
is stored as a blob like a body (compressed, and once however many exchanges share
it), and ``exchanges.canonical`` is left empty. Rows written before version 3 keep
their form in ``canonical`` with ``canonical_digest`` NULL, and are read as they are.
4 adds to ``exchanges`` a column per fact (storage.records.FACT_KINDS), ``run_id``,
``stripped``, ``messages_digest`` (a WebSocket's transcript, as a blob) and
``message_count``, all NULL in rows written before; and the ``drifts`` table.
5 adds ``origin`` to exchanges (an exchange copied from another: replayed, forked, edited,
resent) and to cassettes (a fork's provenance); the search index (``texts``, each distinct
searchable value once; ``text_uses``, which exchange holds which value where; SQLite's FTS5
table ``texts_fts`` or a PostgreSQL ``tsvector`` column over the values); and ``misses``,
replay's misses as they were answered; and ``replay_positions``, where proxy replicas that
share a replay session count occurrences (a store migrated from 4 gets the search index of
7, which the step to 7 builds from the exchanges already stored).
6 adds ``blobs.base`` and ``blobs.depth``: a body stored as a delta against another
(storage.deltas), and how many bases reading it takes; NULL in rows written before, which
are stored on their own; and ``cassette_totals``, what ``ls`` shows of each cassette as of
the chain head it was counted at (a cache that readers keep; storage.sql.listings).
7 keeps the search index small: a value is stored compressed (``texts.data``, zstd, or the
UTF-8 text itself when that is shorter) and named by 64 bits of its digest; SQLite's FTS5 table
is contentless (it keeps the tokens, not the text) and PostgreSQL's ``tsvector`` is a plain
column written with the value; ``text_uses`` has no rowid on SQLite; and the ``meta`` row
``search_indexed`` marks how far the index is known to be written (storage.sql.search);
and ``exchanges.run_id`` is indexed, so that a run is found without reading every exchange.
The migration leaves the index empty and unmarked, and the store's writer fills it from the
stored exchanges when it starts (storage.sql.search.catch_up); a store older than 5 gets this
index directly.
8 adds triage's signals to ``exchanges`` (``failure_kind``, ``signature``, ``trace``,
``signature_version`` and ``run_failures``, storage.records.Signals; NULL in rows written
before, which ``freezeframe triage --rebuild`` works out), an index of the failing
exchanges, and ``notes``, case notes on a cassette or one of its exchanges.
9 adds ``rechecks`` and ``tapes``. 10 indexes ``exchanges`` by ``started_at`` (and ``seq``), so
that search lists the exchanges holding a value most of them hold newest first without reading
them all (storage.sql.search), and adds ``cassette_totals.failed``, so that the case file's list
of cassettes says how many exchanges of each failed without counting them again.

The steps from one version to the next are Alembic revisions (storage.sql.migrations, frozen);
storage.sql.versioning creates, migrates and guards the store when it is opened.
"""

import json
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Dialect,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)

from freezeframe.storage.records import FACT_KINDS

SCHEMA_VERSION = 10

_ESCAPED = "\uffff"


class ExactText(TypeDecorator[str]):
    """Text that keeps any Python str, including what databases refuse.

    mitmproxy decodes undecodable request bytes with surrogateescape, leaving lone
    surrogates that no UTF-8 column can hold, and PostgreSQL text cannot hold NUL.
    Such a value is stored as a JSON string literal behind a U+FFFF marker (a
    noncharacter that never starts real text, and is itself escaped when it does);
    every other value is stored as it is, so the database stays readable.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return to_stored(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        return from_stored(value)


def to_stored(value: str | None) -> str | None:
    """What an ExactText column stores for ``value`` (for statements run on the driver)."""
    if value is None or _storable(value):
        return value
    return _ESCAPED + json.dumps(value, ensure_ascii=True)


def from_stored(value: str | None) -> str | None:
    """The value an ExactText column's stored text stands for."""
    if value is None or not value.startswith(_ESCAPED):
        return value
    text: str = json.loads(value[len(_ESCAPED) :])
    return text


def _storable(value: str) -> bool:
    if "\x00" in value or value.startswith(_ESCAPED):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fact_column(name: str, kind: str) -> Column[Any]:
    """A fact's column: typed by its kind, mappings as JSON text, NULL when unknown."""
    match kind:
        case "float":
            return Column(name, Double)
        case "int":
            return Column(name, BigInteger)
        case "bool":
            return Column(name, Boolean)
        case "text":
            return Column(name, ExactText)
    return Column(name, Text)


metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)

meta = Table(
    "meta",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

cassettes = Table(
    "cassettes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", ExactText, nullable=False, unique=True),
    Column("created_at", Double, nullable=False),
    # The chain value of the last exchange written, so that exchanges deleted from
    # the end of a cassette are detected too.
    Column("head", String(64), nullable=False),
    # Version 5. A fork's provenance (JSON: source, last seq, the source's head then); its
    # chain starts from a link over it instead of GENESIS (storage.sql.fork).
    Column("origin", Text),
)

# Version 6. What ``ls`` shows of each cassette, as of the chain head it was counted at: a
# cassette whose head has not moved is not counted again, so listing a store of a million
# exchanges reads one row per cassette. A cache: a row whose head is not the cassette's is
# ignored, and readers write it (storage.sql.listings), never the recording path.
cassette_totals = Table(
    "cassette_totals",
    metadata,
    Column("cassette_id", Integer, primary_key=True, autoincrement=False),
    Column("head", String(64), nullable=False),
    Column("exchanges", Integer, nullable=False),
    Column("first_at", Double),
    Column("last_at", Double),
    Column("stored_bytes", BigInteger, nullable=False),
    # Version 10. Its exchanges that failed (RunOverview.failed), for the case file's list;
    # NULL in rows counted before, which are counted again.
    Column("failed", Integer),
)

blobs = Table(
    "blobs",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("stored_size", BigInteger, nullable=False),
    # 0: ``data`` is the whole body, one zstd frame. N > 0: the body was streamed and
    # is in ``blob_parts`` rows 0 to N-1, and ``data`` is empty (not NULL, because
    # SQLite cannot relax a NOT NULL column without copying the table).
    Column("data", LargeBinary, nullable=False),
    Column("parts", Integer, nullable=False, server_default=text("0")),
    # Version 5. When it was stored (epoch seconds), so that gc leaves a body alone while
    # the exchange that will name it may still be on its way; NULL: stored before.
    Column("stored_at", Double),
    # Version 6. The body ``data`` was compressed against (its raw bytes as zstd's
    # dictionary), and the length of that chain of bases; NULL: none, stored on its own.
    Column("base", ForeignKey("blobs.digest")),
    Column("depth", Integer),
)

blob_parts = Table(
    "blob_parts",
    metadata,
    Column("digest", ForeignKey("blobs.digest"), primary_key=True),
    Column("idx", Integer, primary_key=True),
    # One zstd frame of up to storage.blobs.PART_SIZE raw bytes, with its checksum.
    Column("data", LargeBinary, nullable=False),
)

exchanges = Table(
    "exchanges",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette_id", ForeignKey("cassettes.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("occurrence", Integer, nullable=False),
    Column("key", ExactText, nullable=False),
    Column("key_scheme", Integer, nullable=False),
    # Empty since version 3, when the form is in ``blobs`` under canonical_digest;
    # the form itself in rows written before (canonical_digest NULL).
    Column("canonical", LargeBinary, nullable=False),
    Column("method", ExactText, nullable=False),
    Column("scheme", ExactText, nullable=False),
    Column("host", ExactText, nullable=False),
    Column("port", Integer, nullable=False),
    Column("path", ExactText, nullable=False),
    Column("http_version", ExactText, nullable=False),
    Column("request_headers", Text, nullable=False),
    Column("request_body_digest", ForeignKey("blobs.digest")),  # NULL: empty body
    Column("started_at", Double, nullable=False),
    Column("duration", Double),
    Column("status", Integer),  # NULL: no response
    Column("reason", ExactText),
    Column("response_http_version", ExactText),
    Column("response_headers", Text),
    Column("response_trailers", Text),
    Column("response_body_digest", ForeignKey("blobs.digest")),  # NULL: empty or no body
    Column("response_bytes", BigInteger, nullable=False),
    Column("chunks", Text),
    Column("first_byte_at", Double),
    Column("outcome", String(16), nullable=False),
    Column("error", ExactText),
    Column("context", Text, nullable=False),
    Column("chain", String(64), nullable=False),
    # NULL: the form is in ``canonical`` (written before version 3, or empty).
    Column("canonical_digest", ForeignKey("blobs.digest")),
    # Version 4. NULL: not a WebSocket. Chained only when set (see storage.sql.rows).
    Column("messages_digest", ForeignKey("blobs.digest")),
    # Version 5. NULL: recorded from the wire. Chained only when set, like messages_digest.
    Column("origin", Text),
    # Version 4, derived and so not chained. NULL in rows written before.
    Column("message_count", Integer),
    Column("run_id", ExactText),
    Column("stripped", Text),
    *(_fact_column(name, kind) for name, kind in FACT_KINDS.items()),
    UniqueConstraint("cassette_id", "seq"),
    # Serves lookup(), the hot path: one index probe per replayed request.
    UniqueConstraint("cassette_id", "key", "occurrence"),
    # Version 8. Triage's signals (storage.records.Signals), derived and so not chained.
    Column("failure_kind", String(24)),
    Column("signature", ExactText),
    Column("trace", Text),
    Column("signature_version", Integer),
    Column("run_failures", Text),
    # Version 7. Serves ``ls --run-id`` and the case file's run filter, across cassettes.
    Index("ix_exchanges_run_id", "run_id"),
    # Version 10. Serves search's newest-first listing of a value most exchanges hold.
    Index("ix_exchanges_started_at", "started_at", "seq"),
)

drifts = Table(
    "drifts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette_id", ForeignKey("cassettes.id"), nullable=False),
    # The exchange's seq; not a foreign key, so that rekey may rewrite exchanges freely.
    Column("seq", Integer, nullable=False),
    Column("at", Double, nullable=False),
    Column("paths", Text, nullable=False),
    Column("context", Text, nullable=False),
    Index(None, "cassette_id", "seq"),
)
"""Drift noted on replays: observations about an exchange, not part of it, so not chained."""

texts = Table(
    "texts",
    metadata,
    # Ids in the order values are stored: FTS5 and GIN lists store the gaps between ids.
    Column("id", Integer, primary_key=True, autoincrement=True),
    # Version 7: 64 bits of the blake3 of the text (storage.sql.search.value_digest), and
    # the text compressed (storage.sql.search.pack).
    Column("digest", BigInteger, nullable=False, unique=True),
    Column("data", LargeBinary, nullable=False),
)
"""Each distinct searchable value once (storage.search), compressed."""

text_uses = Table(
    "text_uses",
    metadata,
    Column("text_id", ForeignKey("texts.id"), primary_key=True),
    Column("exchange_id", ForeignKey("exchanges.id"), primary_key=True),
    Column("part", String(16), primary_key=True),
    Index(None, "exchange_id"),
    # Version 7: the primary key is the table; a rowid would be a third copy of each row.
    sqlite_with_rowid=False,
)
"""Which exchange holds which value, and where (request, response or metadata)."""

misses = Table(
    "misses",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # A name, not a foreign key: a miss may name a cassette that does not exist.
    Column("cassette", ExactText, nullable=False),
    Column("at", Double, nullable=False),
    Column("kind", String(48), nullable=False),
    Column("method", ExactText, nullable=False),
    Column("url", ExactText, nullable=False),
    Column("key", ExactText, nullable=False),
    Column("occurrence", Integer, nullable=False),
    Column("recorded", Integer, nullable=False),
    Column("message", ExactText, nullable=False),
    Column("context", Text, nullable=False),
    Column("nearest", Text, nullable=False),
    Index(None, "cassette", "at"),
)
"""Replay's misses, as the client was answered: observations, not part of any chain."""

notes = Table(
    "notes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # A name, like misses: notes outlive nothing, but a cassette removed takes its own.
    Column("cassette", ExactText, nullable=False),
    Column("seq", Integer),  # NULL: about the whole cassette
    Column("at", Double, nullable=False),
    Column("text", ExactText, nullable=False),
    Index(None, "cassette", "seq"),
)
"""Version 8. Case notes (storage.records.Note): observations, not part of any chain."""

rechecks = Table(
    "rechecks",
    metadata,
    Column("signature", ExactText, primary_key=True),
    Column("at", Double, nullable=False),
    Column("document", Text, nullable=False),
)
"""Version 9. The last ``recheck`` of each failure group (storage.records.RecheckResult),
shown on the case file's triage page: an observation, not part of any chain."""

tapes = Table(
    "tapes",
    metadata,
    Column("cassette", ExactText, primary_key=True),
    Column("at", Double, nullable=False),
    Column("document", Text, nullable=False),
)
"""Version 9. What the last replay of each cassette left unasked or out of order
(storage.records.TapeRecord): ``show --unused``, the case file."""

replay_positions = Table(
    "replay_positions",
    metadata,
    Column("session", ExactText, primary_key=True),
    Column("cassette", ExactText, primary_key=True),
    Column("key", ExactText, primary_key=True),
    Column("next", Integer, nullable=False),
)
"""A shared replay session's next occurrence per key, for proxy replicas replaying together."""

_SQLITE_SEARCH = (
    # Contentless: the text is in ``texts.data``, compressed; FTS5 keeps only its tokens.
    # Without a column size per row, which only ranking would read.
    "CREATE VIRTUAL TABLE IF NOT EXISTS texts_fts USING fts5("
    "body, content='', columnsize=0, tokenize='unicode61')"
)
_POSTGRESQL_SEARCH = (
    # Written with the value, from the text the writer has in hand (storage.sql.search).
    "ALTER TABLE texts ADD COLUMN IF NOT EXISTS tsv tsvector NOT NULL",
    "CREATE INDEX IF NOT EXISTS ix_texts_tsv ON texts USING GIN (tsv)",
)


TRIAGE_WHERE = "failure_kind IS NOT NULL OR run_failures IS NOT NULL"
"""The exchanges triage reads: those with a failure of their own or of their run."""


def create_triage_index(conn: Connection) -> None:
    """Version 8. The index triage reads: only the failing exchanges, a few of a store."""
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_exchanges_triage ON exchanges "
        f"(cassette_id, seq) WHERE {TRIAGE_WHERE}"
    )


def create_search(conn: Connection) -> None:
    """The full-text side of ``texts``, which only the database's own dialect can say."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(_SQLITE_SEARCH)
    else:
        for statement in _POSTGRESQL_SEARCH:
            conn.exec_driver_sql(statement)


DERIVED = ("message_count", "run_id", "stripped", *FACT_KINDS)
"""Columns derived from what the chain covers, or observed about it: not chained."""

SIGNALS = ("failure_kind", "signature", "trace", "signature_version", "run_failures")
"""Version 8. Triage's signals: derived, so not chained either."""

CHAINED = tuple(
    c
    for c in exchanges.c
    if c.name not in {"id", "cassette_id", "chain", "canonical_digest", *DERIVED, *SIGNALS}
)
"""The columns an exchange's chain digest covers: all that describe the exchange. The
chain covers the canonical form itself, as ``canonical``, wherever it is stored, and
``messages_digest`` only when it is set, so chains written before version 4 still hold."""
