"""One plausible exchange for the tests to record or read, any field of it replaced."""

from __future__ import annotations

import dataclasses
from typing import Any

from freezeframe.storage import Chunk, Exchange, NewExchange, Outcome, RecordedResponse, Slot

__all__ = ["changed", "plausible_exchange", "plausible_response", "stored_exchange"]


def plausible_response(**changes: Any) -> RecordedResponse:
    """A 200 answer with a small JSON body, its first byte at 0.25 s; keywords replace
    any field."""
    response = RecordedResponse(
        status=200,
        reason="OK",
        http_version="HTTP/1.1",
        headers=((b"content-type", b"application/json"),),
        body=b"hello",
        chunks=(Chunk(0, 0.25),),
        first_byte_at=0.25,
    )
    return dataclasses.replace(response, **changes)


def plausible_exchange(
    slot: Slot, *, cassette: str = "c", key: str = "k", **changes: Any
) -> NewExchange:
    """A complete ``POST https://api.example.com/v1/chat`` in ``slot``, its canonical form
    following ``key``, answered with :func:`plausible_response`; keywords replace any
    field."""
    exchange = NewExchange(
        cassette=cassette,
        key=key,
        key_scheme=1,
        canonical=b"POST /v1/chat " + key.encode(),
        method="POST",
        scheme="https",
        host="api.example.com",
        port=443,
        path="/v1/chat",
        http_version="HTTP/1.1",
        request_headers=((b"host", b"api.example.com"),),
        request_body=b'{"q": 1}',
        started_at=1_700_000_000.0,
        duration=0.5,
        response=plausible_response(),
        outcome=Outcome.COMPLETE,
        error=None,
        context={"run-id": "run-1"},
        slot=slot,
    )
    return dataclasses.replace(exchange, **changes)


def stored_exchange(
    *,
    seq: int,
    method: str = "POST",
    url: str = "https://api.example.com/v1/chat",
    request_headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),),
    request_body: bytes = b"",
    status: int | None = 200,
    response_headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),),
    response_body: bytes = b"",
    started_at: float | None = None,
    duration: float = 0.5,
    first_byte_at: float = 0.1,
    **changes: Any,
) -> Exchange:
    """An exchange as a store gives it back, at ``seq`` of cassette ``c``: ``url`` split into
    scheme, host, port and path; answered with ``status`` and ``response_body`` (no answer
    at all when ``status`` is None); started ``seq`` seconds after 1 700 000 000 unless
    ``started_at`` says when. Keywords replace any other field of what was recorded."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    host, _, port = authority.partition(":")
    response = None
    if status is not None:
        response = plausible_response(
            status=status,
            headers=response_headers,
            body=response_body,
            chunks=(Chunk(0, first_byte_at),),
            first_byte_at=first_byte_at,
        )
    recorded = NewExchange(
        cassette="c",
        key=f"k{seq}",
        key_scheme=1,
        canonical=b"{}",
        method=method,
        scheme=scheme,
        host=host,
        port=int(port) if port else {"http": 80, "https": 443}[scheme],
        path=slash + path,
        http_version="HTTP/1.1",
        request_headers=request_headers,
        request_body=request_body,
        started_at=1_700_000_000.0 + seq if started_at is None else started_at,
        duration=duration,
        response=response,
        outcome=Outcome.COMPLETE if response is not None else Outcome.FAILED,
        error=None if response is not None else "connection refused",
        context={},
        slot=Slot(seq, 0),
        stripped=None,
    )
    return Exchange(dataclasses.replace(recorded, **changes), chain="0" * 64)


def changed(exchange: Exchange, **changes: Any) -> Exchange:
    """``exchange`` with fields of what was recorded replaced (its cassette, slot, answer...)."""
    return dataclasses.replace(exchange, recorded=dataclasses.replace(exchange.recorded, **changes))
