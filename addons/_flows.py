"""The only module that knows both mitmproxy's flows and freezeframe's own records.

Every other addon translates through here, so a change in mitmproxy's flow model is
absorbed in one place (hishel's ``_httpx_to_internal`` habit), and ``canonicalize`` and
``storage`` never learn what an ``HTTPFlow`` is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mitmproxy import http

from freezeframe.addons.routing import Decision
from freezeframe.addons.state import Mode
from freezeframe.canonicalize import Canonical, KeyConfig, RequestView, canonicalize
from freezeframe.evidence.requests import WireRequest
from freezeframe.evidence.requests import decoded_body as decoded_body_of
from freezeframe.storage import BlobRef, Chunk, Exchange, Header, RecordedResponse
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.perturb import Perturbed

log = logging.getLogger("freezeframe.proxy")

METADATA_KEY = "freezeframe"


@dataclass(slots=True)
class FlowInfo:
    """What freezeframe has learned about one flow, kept in ``flow.metadata``."""

    cassette: str
    context: dict[str, str]
    target: str  # path and query as forwarded, secrets redacted
    request_headers: tuple[Header, ...]  # as forwarded, secrets redacted
    secrets: tuple[bytes, ...]  # the raw secrets this request carries, to scrub from its answer
    decision: Decision  # how it is handled: the mode in force, or its route's (addons.routing)
    canonical: Canonical | None = None
    view: RequestView | None = None  # what ``canonical`` was computed from, when held whole
    served: Exchange | None = None  # set when replay answered this flow
    perturbed: Perturbed | None = None  # set when that answer was perturbed (--perturb)
    notes: list[str] = field(default_factory=list)

    @property
    def mode(self) -> Mode:
        return self.decision.mode

    @property
    def record_cassette(self) -> str:
        """Where it is recorded if forwarded: the new run's cassette (--record-into) when
        its route says so, else its own."""
        return self.decision.record_into or self.cassette

    @property
    def run(self) -> str:
        """The run it belongs to, for ``--after-miss``: its run id, or "" without one."""
        return self.context.get("run-id", "")


def info_of(flow: http.HTTPFlow) -> FlowInfo | None:
    info = flow.metadata.get(METADATA_KEY)
    return info if isinstance(info, FlowInfo) else None


def request_body(flow: http.HTTPFlow, redactor: Redactor) -> bytes:
    """The body as it was sent (still content-encoded), with secrets replaced."""
    info = info_of(flow)
    return redactor.body(flow.request.raw_content or b"", info.secrets if info else ())


def canonical_of(
    flow: http.HTTPFlow, info: FlowInfo, config: KeyConfig, redactor: Redactor
) -> Canonical:
    """Compute the request key once per flow; replay and record both need it."""
    if info.canonical is None:
        body = redactor.body(decoded_body(flow, info), info.secrets)
        info.view = wire_request(flow, info).view_of(body)
        info.canonical = canonicalize(info.view, config)
    return info.canonical


def decoded_body(flow: http.HTTPFlow, info: FlowInfo | None = None) -> bytes:
    """The request body with its content codings undone, as keys and ids are read from it
    (evidence.requests.decoded_body, the limits every reader of a request keys with;
    mitmproxy's own decoder has none). A body that does not decode whole is read as it was
    sent, and the log says so."""
    raw = flow.request.raw_content or b""
    body, note = decoded_body_of(raw, flow.request.headers.fields)
    if note is not None:
        where = display_url(flow, info) if info is not None else flow.request.pretty_url
        log.warning("%s %s: body keyed as sent: %s", flow.request.method, where, note)
    return body


def wire_request(flow: http.HTTPFlow, info: FlowInfo, body: bytes | None = None) -> WireRequest:
    """The flow's request as forwarded: target and headers with secrets already markers,
    and ``body`` (by default the flow's, as sent and not yet redacted)."""
    request = flow.request
    return WireRequest(
        request.method,
        request.scheme,
        request.host,
        request.port,
        info.target,
        info.request_headers,
        request.raw_content or b"" if body is None else body,
        request.http_version,
    )


def request_view(flow: http.HTTPFlow, info: FlowInfo, body: bytes) -> RequestView:
    """The flow as ``canonicalize`` sees it: target and headers as forwarded, secrets
    already markers, and ``body`` (content-decoded by the caller)."""
    return wire_request(flow, info).view_of(body)


def display_url(flow: http.HTTPFlow, info: FlowInfo) -> str:
    request = flow.request
    default_port = {"http": 80, "https": 443}.get(request.scheme)
    port = "" if request.port == default_port else f":{request.port}"
    return f"{request.scheme}://{request.host}{port}{info.target}"


def recorded_response(
    flow: http.HTTPFlow,
    info: FlowInfo,
    body: bytes,
    body_ref: BlobRef | None,
    chunks: tuple[tuple[int, float], ...],
    redactor: Redactor,
    headers: tuple[Header, ...] | None = None,
) -> RecordedResponse:
    """The response as it will be stored; ``body`` is already redacted, and ``headers``
    are the upstream's when they differ from those the client was sent."""
    response = flow.response
    assert response is not None
    if headers is None:
        headers = response.headers.fields
    started = flow.request.timestamp_start
    return RecordedResponse(
        status=response.status_code,
        reason=response.reason,
        http_version=response.http_version,
        headers=redactor.headers(headers, info.secrets),
        body=body,
        body_ref=body_ref,
        chunks=tuple(Chunk(offset=offset, at=at) for offset, at in chunks),
        first_byte_at=response.timestamp_start - started if response.timestamp_start else None,
        trailers=redactor.headers(response.trailers.fields, info.secrets)
        if response.trailers
        else (),
    )


def response_from(recorded: RecordedResponse, headers: Sequence[Header]) -> http.Response:
    """A mitmproxy response that sends the recorded bytes unchanged (same encoding)."""
    now = time.time()
    return http.Response(
        http_version=recorded.http_version.encode("ascii"),
        status_code=recorded.status,
        reason=recorded.reason.encode("latin-1"),
        headers=http.Headers(list(headers)),
        content=recorded.body,
        trailers=http.Headers(list(recorded.trailers)) if recorded.trailers else None,
        timestamp_start=now,
        timestamp_end=now,
    )
