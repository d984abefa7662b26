"""A stored request as canonicalize sees it, for whatever keys or reads a recording again.

The proxy builds its RequestView from the flow (addons._flows); ``rekey``, ``explain`` against
a cassette, edits and diffs build it from the stored exchange here, through the same
``RequestView.of``, so all compute the same key for the same request.
"""

from __future__ import annotations

from freezeframe.canonicalize import RequestView
from freezeframe.storage import Exchange
from freezeframe.storage.encodings import HELD_DECODED, decode_body


def stored_view(exchange: Exchange) -> RequestView:
    """The request as the proxy saw it when keying it: target and headers as stored
    (secrets already markers), the body content-decoded as the proxy decodes it (an
    undecodable body is keyed by its bytes, as the proxy keys it)."""
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in exchange.request_headers
    )
    body = exchange.request_body
    decoded = decode_body(body, exchange.request_headers, HELD_DECODED)
    if decoded.whole:
        body = decoded.data
    return RequestView.of(
        exchange.method,
        exchange.scheme,
        exchange.host,
        exchange.port,
        exchange.path,
        headers,
        body,
    )
