"""One plausible exchange for the storage tests to record, any field of it replaced."""

from __future__ import annotations

import dataclasses
from typing import Any

from storage import Chunk, NewExchange, Outcome, RecordedResponse, Slot

__all__ = ["plausible_exchange", "plausible_response"]


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
