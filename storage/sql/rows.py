"""Records to rows and back, including the JSON forms of headers, chunks and context.

Header bytes are written to JSON as latin-1 text, which maps every byte to one
code point and back, so any header survives the round trip exactly. Numbers that
are floats in the records are stored as floats even when a caller passes an int,
so the row read back is the row that was hashed into the chain.

Facts are stored one column each, typed by their kind; token counts and header
values as JSON text. A fact no column can hold (an integer beyond 64 bits, a float
that is not finite) is stored as unknown.
"""

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import RowMapping

from freezeframe.storage import blobs, boundedjson, transcript
from freezeframe.storage.chain import Scalar
from freezeframe.storage.deltas import Base
from freezeframe.storage.errors import StoreError
from freezeframe.storage.records import (
    FACT_KINDS,
    INT64,
    BlobRef,
    Chunk,
    Exchange,
    ExchangeSummary,
    FactValue,
    Header,
    Message,
    NewExchange,
    Origin,
    Outcome,
    RecordedResponse,
    Signals,
    Slot,
    format_url,
)
from freezeframe.storage.sql.schema import CHAINED


def exchange_row(
    exchange: NewExchange,
    cassette_id: int,
    request_body_digest: str | None,
    response_body_digest: str | None,
    messages_digest: str | None = None,
) -> dict[str, Scalar]:
    """The exchanges row for ``exchange``, without its chain value."""
    response = exchange.response
    messages = exchange.messages
    return {
        "cassette_id": cassette_id,
        "seq": exchange.slot.seq,
        "occurrence": exchange.slot.occurrence,
        "key": exchange.key,
        "key_scheme": exchange.key_scheme,
        "canonical": bytes(exchange.canonical),
        "method": exchange.method,
        "scheme": exchange.scheme,
        "host": exchange.host,
        "port": exchange.port,
        "path": exchange.path,
        "http_version": exchange.http_version,
        "request_headers": headers_json(exchange.request_headers),
        "request_body_digest": request_body_digest,
        "started_at": float(exchange.started_at),
        "duration": _float(exchange.duration),
        "status": response.status if response else None,
        "reason": response.reason if response else None,
        "response_http_version": response.http_version if response else None,
        "response_headers": headers_json(response.headers) if response else None,
        "response_trailers": headers_json(response.trailers) if response else None,
        "response_body_digest": response_body_digest,
        "response_bytes": _size(response) if response else 0,
        "chunks": _chunks_json(response.chunks) if response else None,
        "first_byte_at": _float(response.first_byte_at) if response else None,
        "outcome": exchange.outcome.value,
        "error": exchange.error,
        "context": json_text(dict(exchange.context)),
        "messages_digest": messages_digest,
        "message_count": None if messages is None else len(messages),
        "origin": origin_json(exchange.origin),
        "run_id": exchange.context.get("run-id"),
        "stripped": stripped_json(exchange.stripped),
        **fact_columns(exchange.facts),
        **signal_columns(exchange.signals),
    }


def signal_columns(signals: Signals | None) -> dict[str, Scalar]:
    """The signal columns' values; all NULL when they were not worked out."""
    if signals is None:
        return dict.fromkeys(
            ("failure_kind", "signature", "trace", "signature_version", "run_failures")
        )
    return {
        "failure_kind": signals.kind,
        "signature": signals.signature,
        "trace": signals.trace,
        "signature_version": signals.version,
        "run_failures": signals.run_failures,
    }


def fact_columns(facts: Mapping[str, FactValue]) -> dict[str, Scalar]:
    """The fact columns' values for checked facts (see storage.records.check_facts)."""
    columns: dict[str, Scalar] = dict.fromkeys(FACT_KINDS)
    for name, value in facts.items():
        kind = FACT_KINDS[name]
        if isinstance(value, Mapping):
            columns[name] = json_text(dict(value))
        elif kind == "float" and isinstance(value, int | float):
            columns[name] = _finite(value)
        elif kind == "int" and isinstance(value, int) and value not in INT64:
            columns[name] = None
        else:
            columns[name] = value
    return columns


def _finite(value: float) -> float | None:
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def facts_of(row: Mapping[str, Any] | RowMapping) -> dict[str, FactValue]:
    """The known facts of a row holding the fact columns."""
    facts: dict[str, FactValue] = {name: row[name] for name in FACT_KINDS if row[name] is not None}
    for name in facts.keys() & _CONVERTED:
        value = row[name]
        # JSON text; and SQLite's driver gives a bool as 0 or 1.
        facts[name] = bool(value) if FACT_KINDS[name] == "bool" else _flat_map(row, name)
    return facts


class DamagedRow(StoreError):
    """A stored column that freezeframe never wrote as it reads: the store was changed."""


def stored_map(row: Mapping[str, Any] | RowMapping, column: str) -> dict[str, Any]:
    """A column freezeframe writes as a JSON object, read back with its nesting bounded.

    Read as it was written, a row someone edited in the database (``usage`` nested 5,000
    deep, a ``context`` that is a list) ended ``show`` and ``export`` in a RecursionError or
    an AttributeError far from the row; it is refused here, naming the row, in one line."""
    where = f"exchange #{row['seq']}" if "seq" in row else "a row"
    try:
        value = boundedjson.loads(row[column])
    except (ValueError, TypeError) as exc:
        raise DamagedRow(
            f"{where}: its stored {column} is not readable ({exc}); the store was changed "
            "outside freezeframe"
        ) from None
    if not isinstance(value, dict):
        raise DamagedRow(
            f"{where}: its stored {column} is a JSON {type(value).__name__}, not an object; "
            "the store was changed outside freezeframe"
        )
    return value


def _flat_map(row: Mapping[str, Any] | RowMapping, column: str) -> dict[str, Any]:
    """A counts or labels fact: an object of numbers or strings, nothing nested."""
    value = stored_map(row, column)
    if any(isinstance(item, dict | list) for item in value.values()):
        where = f"exchange #{row['seq']}" if "seq" in row else "a row"
        raise DamagedRow(
            f"{where}: its stored {column} nests objects where freezeframe keeps numbers "
            "or names; the store was changed outside freezeframe"
        )
    return value


_CONVERTED = frozenset(
    name for name, kind in FACT_KINDS.items() if kind in {"bool", "counts", "labels"}
)


def stripped_json(stripped: Mapping[str, str] | None) -> str:
    """Sorted, so that equal digests are stored as equal text; None (not kept) as nothing
    stripped."""
    return json_text(dict(sorted(stripped.items()))) if stripped else "{}"


_CHAINED_NAMES = tuple(column.name for column in CHAINED)


def chain_fields(
    row: Mapping[str, Any] | RowMapping, cassette: str, canonical: bytes | None = None
) -> dict[str, Scalar]:
    """What an exchange's chain digest covers: its stored fields, with the cassette
    named rather than numbered, since ids are private to one database, and the
    canonical form itself (``canonical``, when the row names its blob instead).

    A row without a transcript is digested without ``messages_digest``, and one without an
    origin without ``origin``, exactly as before those columns existed, so chains written
    before schema versions 4 and 5 still hold."""
    fields = {name: row[name] for name in _CHAINED_NAMES}
    for optional in ("messages_digest", "origin"):
        if fields[optional] is None:
            del fields[optional]
    fields["cassette"] = cassette
    if canonical is not None:
        fields["canonical"] = canonical
    return fields


def canonical_of(
    row: Mapping[str, Any] | RowMapping, bodies: Mapping[str, bytes | BlobRef]
) -> bytes:
    """The row's canonical form: from its blob, or as written before schema version 3."""
    name = row["canonical_digest"]
    if name is None:
        return bytes(row["canonical"])
    form = bodies[name]
    assert isinstance(form, bytes), "canonical forms are always loaded whole"
    return form


def to_exchange(
    row: Mapping[str, Any] | RowMapping, cassette: str, bodies: Mapping[str, bytes | BlobRef]
) -> Exchange:
    """An Exchange from a row holding the CHAINED columns, ``chain``, ``canonical_digest``,
    ``stripped`` and the fact columns; ``bodies`` gives each body, canonical form and
    transcript by digest, loaded or (a large body) as a reference to read it by. Its
    drift is left empty. Raises DamagedTranscript."""
    response = None
    if row["status"] is not None:
        body, body_ref = _body(row["response_body_digest"], bodies)
        response = RecordedResponse(
            status=row["status"],
            reason=row["reason"],
            http_version=row["response_http_version"],
            headers=_headers(row["response_headers"]),
            body=body,
            chunks=tuple(Chunk(offset, at) for offset, at in json.loads(row["chunks"])),
            first_byte_at=row["first_byte_at"],
            trailers=_headers(row["response_trailers"]),
            body_ref=body_ref,
        )
    request_body, request_body_ref = _body(row["request_body_digest"], bodies)
    recorded = NewExchange(
        cassette=cassette,
        key=row["key"],
        key_scheme=row["key_scheme"],
        canonical=canonical_of(row, bodies),
        method=row["method"],
        scheme=row["scheme"],
        host=row["host"],
        port=row["port"],
        path=row["path"],
        http_version=row["http_version"],
        request_headers=_headers(row["request_headers"]),
        request_body=request_body,
        started_at=row["started_at"],
        duration=row["duration"],
        response=response,
        outcome=Outcome(row["outcome"]),
        error=row["error"],
        context=stored_map(row, "context"),
        slot=Slot(row["seq"], row["occurrence"]),
        request_body_ref=request_body_ref,
        stripped=_stripped(row["stripped"]),
        facts=facts_of(row),
        messages=_messages(row["messages_digest"], bodies),
        origin=origin_of(row["origin"]),
    )
    return Exchange(recorded, chain=row["chain"])


def to_summary(row: RowMapping, cassette: str) -> ExchangeSummary:
    return ExchangeSummary(
        cassette=cassette,
        seq=row["seq"],
        occurrence=row["occurrence"],
        key=row["key"],
        method=row["method"],
        url=format_url(row["scheme"], row["host"], row["port"], row["path"]),
        status=row["status"],
        outcome=Outcome(row["outcome"]),
        started_at=row["started_at"],
        duration=row["duration"],
        response_bytes=row["response_bytes"],
        context=stored_map(row, "context"),
        facts=facts_of(row),
        drifted=row["drifted"],
        websocket_messages=row["message_count"],
        origin=json.loads(row["origin"])["kind"] if row["origin"] else None,
        first_byte_after=row["first_byte_at"],
    )


def _stripped(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    # Most requests have nothing stripped; spare the replay path a JSON parse.
    return {} if text == "{}" else dict(json.loads(text))


def blob_row(name: str, data: bytes, base: Base | None = None, depth: int = 0) -> dict[str, Scalar]:
    """The blobs row that stores ``data`` whole, under its digest ``name``: on its own, or
    against ``base``, which is ``depth`` - 1 bases away from a body stored on its own."""
    stored = blobs.compress(data) if base is None else blobs.compress_against(data, base.data)
    return {
        "digest": name,
        "size": len(data),
        "stored_size": len(stored),
        "data": stored,
        "parts": 0,
        "stored_at": time.time(),
        "base": None if base is None else base.name,
        "depth": depth if base is not None else 0,
    }


def external_row(name: str, size: int) -> dict[str, Scalar]:
    """The blobs row of a body kept in object storage (storage.objects): its name and size,
    and no data (storage.sql.bodies.external tells such a row)."""
    return {
        "digest": name,
        "size": size,
        "stored_size": 0,
        "data": b"",
        "parts": 0,
        "stored_at": time.time(),
        "base": None,
        "depth": 0,
    }


def _messages(
    digest: str | None, bodies: Mapping[str, bytes | BlobRef]
) -> tuple[Message, ...] | None:
    if digest is None:
        return None
    stored = bodies[digest]
    assert isinstance(stored, bytes), "transcripts are always loaded whole"
    return transcript.decode(stored, digest)


def _body(
    digest: str | None, bodies: Mapping[str, bytes | BlobRef]
) -> tuple[bytes, BlobRef | None]:
    found = b"" if digest is None else bodies[digest]
    return (b"", found) if isinstance(found, BlobRef) else (found, None)


def _size(response: RecordedResponse) -> int:
    return response.body_ref.size if response.body_ref else len(response.body)


def headers_json(headers: Sequence[Header]) -> str:
    return json_text([[name.decode("latin-1"), value.decode("latin-1")] for name, value in headers])


def _headers(text: str) -> tuple[Header, ...]:
    return tuple(
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in json.loads(text)
    )


def _chunks_json(chunks: Sequence[Chunk]) -> str:
    return json_text([[int(chunk.offset), float(chunk.at)] for chunk in chunks])


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def origin_json(origin: Origin | None) -> str | None:
    if origin is None:
        return None
    return json_text(
        {
            "kind": origin.kind,
            "cassette": origin.cassette,
            "seq": origin.seq,
            "chain": origin.chain,
            "changes": list(origin.changes),
        }
    )


def origin_of(text: str | None) -> Origin | None:
    if text is None:
        return None
    found = json.loads(text)
    return Origin(
        kind=found["kind"],
        cassette=found["cassette"],
        seq=found["seq"],
        chain=found["chain"],
        changes=tuple(found["changes"]),
    )


def json_text(value: object) -> str:
    """Compact and ASCII-only, so text that no database column accepts (lone
    surrogates, NUL) arrives escaped."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
