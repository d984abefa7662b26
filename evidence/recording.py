"""The one builder of an exchange to record, for every writer of recordings.

The proxy (its recordings and its ``--record-into`` copies), ``resend`` and imports of
capture files all record an exchange the same way: the key, its scheme, the canonical form
and the digests of what the key left out come from the request's ``Canonical``; the facts
are read (evidence.facts) from the request as keyed and the response as stored, both
already redacted, so a secret can never reach a fact column. The proxy's recordings leave
that reading to the store's writer (``read_later``, evidence.reading_in), off its event
loop.
"""

from __future__ import annotations

from collections.abc import Mapping

from freezeframe.canonicalize import SCHEME_VERSION, Canonical, RequestView
from freezeframe.canonicalize.drift import digests
from freezeframe.evidence.facts import exchange_facts
from freezeframe.evidence.requests import WireRequest
from freezeframe.storage import (
    BlobRef,
    Message,
    NewExchange,
    Origin,
    Outcome,
    RecordedResponse,
    Slot,
    ToRead,
)
from freezeframe.storage.encodings import Decoded


def new_exchange(
    cassette: str,
    request: WireRequest,
    canonical: Canonical,
    keyed: RequestView,
    *,
    slot: Slot,
    started_at: float,
    duration: float | None,
    response: RecordedResponse | None,
    outcome: Outcome,
    error: str | None,
    context: Mapping[str, str],
    request_body_ref: BlobRef | None = None,
    messages: tuple[Message, ...] | None = None,
    origin: Origin | None = None,
    decoded_answer: Decoded | None = None,
    read_later: bool = False,
) -> NewExchange:
    """``request`` as it is stored (redacted) and ``keyed`` as ``canonical`` was computed
    from; ``request_body_ref`` stands for a body written through a blob writer (then
    ``request.body`` is b""). ``decoded_answer`` is the response's body decoded already,
    when its writer has it (the proxy decodes each body once, storage.inflight): the facts read
    it instead of decoding it again. With ``read_later`` the facts and signals are left
    to the store's writer (``NewExchange.to_read``)."""
    to_read = ToRead(canonical.profile, keyed.body, decoded_answer) if read_later else None
    return NewExchange(
        cassette=cassette,
        key=canonical.key,
        key_scheme=SCHEME_VERSION,
        canonical=canonical.form,
        method=request.method,
        scheme=request.scheme,
        host=request.host,
        port=request.port,
        path=request.target,
        http_version=request.http_version,
        request_headers=request.headers,
        request_body=request.body,
        request_body_ref=request_body_ref,
        started_at=started_at,
        duration=duration,
        response=response,
        outcome=outcome,
        error=error,
        context=context,
        slot=slot,
        stripped=digests(canonical.stripped),
        facts={}
        if read_later
        else exchange_facts(keyed, response, canonical.profile, decoded_answer),
        messages=messages,
        origin=origin,
        to_read=to_read,
    )
