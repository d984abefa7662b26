"""The replay-kit facts of an exchange, from the bytes the store keeps.

The proxy reads them when it records (addons.record), and an edited answer needs them read
again (whatif.editing); both go through here, so an edit's model, usage and finish reason
are read exactly as a recording's are. The answer is content-decoded with the store's one
bounded decoder, since canonicalize knows no content codings.
"""

from __future__ import annotations

from freezeframe.canonicalize import (
    FACTS_BODY_LIMIT,
    FactValue,
    RequestView,
    ResponseView,
    facts_of,
)
from freezeframe.storage import RecordedResponse
from freezeframe.storage.encodings import Decoded, decode_body


def exchange_facts(
    request: RequestView,
    response: RecordedResponse | None,
    profile: str | None,
    decoded: Decoded | None = None,
) -> dict[str, FactValue]:
    """``decoded``: the answer's body decoded already (see ``response_view``)."""
    return facts_of(request, response_view(response, decoded), profile)


def response_view(
    response: RecordedResponse | None, decoded: Decoded | None = None
) -> ResponseView | None:
    """The answer as canonicalize reads facts from it: decoded, unless too large to read.
    ``decoded`` is its body decoded already, by a writer that had to decode it anyway (the
    proxy, storage.inflight), so it is not decoded twice."""
    if response is None:
        return None
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in response.headers
    )
    body: bytes | None = None
    if response.body_ref is None and len(response.body) <= FACTS_BODY_LIMIT:
        if decoded is None:
            decoded = decode_body(response.body, response.headers, FACTS_BODY_LIMIT)
        # A truncated or unknown coding gives no body; the headers still give facts.
        whole = decoded.whole and len(decoded.data) <= FACTS_BODY_LIMIT
        body = decoded.data if whole else None
    content_type = next((value for name, value in headers if name.lower() == "content-type"), "")
    return ResponseView(
        status=response.status, headers=headers, body=body, content_type=content_type
    )
