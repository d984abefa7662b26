"""Records to rows and back, including the JSON forms of headers, chunks and context.

Header bytes are written to JSON as latin-1 text, which maps every byte to one
code point and back, so any header survives the round trip exactly. Numbers that
are floats in the records are stored as floats even when a caller passes an int,
so the row read back is the row that was hashed into the chain.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import RowMapping

from storage.chain import Scalar
from storage.records import (
    BlobRef,
    Chunk,
    Exchange,
    ExchangeSummary,
    Header,
    NewExchange,
    Outcome,
    RecordedResponse,
    format_url,
)
from storage.sql.schema import CHAINED


def exchange_row(
    exchange: NewExchange,
    cassette_id: int,
    request_body_digest: str | None,
    response_body_digest: str | None,
) -> dict[str, Scalar]:
    """The exchanges row for ``exchange``, without its chain value."""
    response = exchange.response
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
        "request_headers": _headers_json(exchange.request_headers),
        "request_body_digest": request_body_digest,
        "started_at": float(exchange.started_at),
        "duration": _float(exchange.duration),
        "status": response.status if response else None,
        "reason": response.reason if response else None,
        "response_http_version": response.http_version if response else None,
        "response_headers": _headers_json(response.headers) if response else None,
        "response_trailers": _headers_json(response.trailers) if response else None,
        "response_body_digest": response_body_digest,
        "response_bytes": _size(response) if response else 0,
        "chunks": _chunks_json(response.chunks) if response else None,
        "first_byte_at": _float(response.first_byte_at) if response else None,
        "outcome": exchange.outcome.value,
        "error": exchange.error,
        "context": _json(dict(exchange.context)),
    }


_CHAINED_NAMES = tuple(column.name for column in CHAINED)


def chain_fields(
    row: Mapping[str, Any] | RowMapping, cassette: str, canonical: bytes | None = None
) -> dict[str, Scalar]:
    """What an exchange's chain digest covers: its stored fields, with the cassette
    named rather than numbered, since ids are private to one database, and the
    canonical form itself (``canonical``, when the row names its blob instead)."""
    fields = {name: row[name] for name in _CHAINED_NAMES}
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
    """An Exchange from a row holding the CHAINED columns, ``chain`` and
    ``canonical_digest``; ``bodies`` gives each body and canonical form by digest,
    loaded or (a large body) as a reference to read it by."""
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
    return Exchange(
        cassette=cassette,
        seq=row["seq"],
        occurrence=row["occurrence"],
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
        context=json.loads(row["context"]),
        chain=row["chain"],
        request_body_ref=request_body_ref,
    )


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
        context=json.loads(row["context"]),
    )


def _body(
    digest: str | None, bodies: Mapping[str, bytes | BlobRef]
) -> tuple[bytes, BlobRef | None]:
    found = b"" if digest is None else bodies[digest]
    return (b"", found) if isinstance(found, BlobRef) else (found, None)


def _size(response: RecordedResponse) -> int:
    return response.body_ref.size if response.body_ref else len(response.body)


def _headers_json(headers: Sequence[Header]) -> str:
    return _json([[name.decode("latin-1"), value.decode("latin-1")] for name, value in headers])


def _headers(text: str) -> tuple[Header, ...]:
    return tuple(
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in json.loads(text)
    )


def _chunks_json(chunks: Sequence[Chunk]) -> str:
    return _json([[int(chunk.offset), float(chunk.at)] for chunk in chunks])


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _json(value: object) -> str:
    """Compact and ASCII-only, so text that no database column accepts (lone
    surrogates, NUL) arrives escaped."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
