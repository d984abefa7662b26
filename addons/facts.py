"""The replay-kit facts of a recorded exchange, read from what is about to be stored.

They are read from the redacted request and response, the bytes the store keeps, so a
secret can never reach a fact column; the answer is content-decoded here because
canonicalize knows no content codings.
"""

from __future__ import annotations

from mitmproxy.net import encoding

from addons._flows import FlowInfo
from canonicalize import FACTS_BODY_LIMIT, FactValue, RequestView, ResponseView, facts_of
from storage import RecordedResponse


def recorded_facts(
    info: FlowInfo, request: RequestView, response: RecordedResponse | None
) -> dict[str, FactValue]:
    profile = info.canonical.profile if info.canonical is not None else None
    return facts_of(request, _response_view(response), profile)


def _response_view(response: RecordedResponse | None) -> ResponseView | None:
    if response is None:
        return None
    headers = tuple(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in response.headers
    )
    fields = {name.lower(): value for name, value in headers}
    body: bytes | None = None
    if response.body_ref is None and len(response.body) <= FACTS_BODY_LIMIT:
        body = response.body
        if coding := fields.get("content-encoding"):
            try:
                body = encoding.decode(body, coding)
            except ValueError:
                body = None  # a truncated or unknown coding: headers still give their facts
    return ResponseView(
        status=response.status,
        headers=headers,
        body=body,
        content_type=fields.get("content-type", ""),
    )
