"""The only module that knows both mitmproxy's flows and freezeframe's own records.

Every other addon translates through here, so a change in mitmproxy's flow model is
absorbed in one place (hishel's ``_httpx_to_internal`` habit), and ``canonicalize`` and
``storage`` never learn what an ``HTTPFlow`` is.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mitmproxy import http

from freezeframe.addons.routing import Decision
from freezeframe.addons.state import Mode
from freezeframe.canonicalize import Canonical, KeyConfig, RequestView, canonicalize
from freezeframe.evidence.requests import WireRequest
from freezeframe.storage import BlobRef, Chunk, Exchange, Header, RecordedResponse
from freezeframe.storage.inflight import Body, Landed
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
    body: Landed | None = None  # the request body as it lands (storage.inflight), once read
    served: Exchange | None = None  # set when replay answered this flow
    perturbed: Perturbed | None = None  # set when that answer was perturbed (--perturb)
    notes: list[str] = field(default_factory=list)
    called: tuple[str, str, int] | None = None
    """Scheme, host and port the client sent the request to, once replay has re-routed the
    flow to the loopback re-enactor (addons.reenact); stored and shown instead of those."""

    @property
    def mode(self) -> Mode:
        return self.decision.mode

    def landed(self, body: Landed) -> None:
        """The request body has landed: the secrets it held by name join those of its
        headers and query, so its answer is scrubbed of them too (an MCP server's token in
        ``tools[].authorization``, which an error answer may quote)."""
        self.body = body
        if body.secrets:
            self.secrets = tuple(
                sorted(set(self.secrets) | set(body.secrets), key=len, reverse=True)
            )

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


def canonical_of(
    flow: http.HTTPFlow, info: FlowInfo, config: KeyConfig, redactor: Redactor
) -> Canonical:
    """Compute the request key once per flow; replay and record both need it. The body is
    read once (storage.inflight), as held by mitmproxy unless it streamed in already."""
    if info.canonical is None:
        landed = info.body
        if landed is None:
            body = Body(redactor, info.secrets, flow.request.headers.fields, hold=None)
            body.feed(flow.request.raw_content or b"")
            landed = body.end()
            info.landed(landed)
        decoded = landed.decoded
        if decoded is not None and not decoded.whole:
            log.warning(
                "%s %s: body keyed as sent: %s",
                flow.request.method,
                display_url(flow, info),
                decoded.note,
            )
        info.view = wire_request(flow, info).view_of(landed.keyed)
        info.canonical = canonicalize(info.view, config)
    return info.canonical


def stored_request(flow: http.HTTPFlow, info: FlowInfo) -> tuple[WireRequest, BlobRef | None]:
    """The request as stored, once keyed: its body as it landed (storage.inflight), with a
    matching Content-Length if it was encoded again, or the reference of a spilled one."""
    landed = info.body
    assert landed is not None  # canonical_of (or a streamed body's end) has read it
    request = wire_request(flow, info, landed.stored)
    if landed.reencoded:
        request = dataclasses.replace(request, headers=landed.headers(request.headers))
    return request, landed.ref


def wire_request(flow: http.HTTPFlow, info: FlowInfo, body: bytes | None = None) -> WireRequest:
    """The flow's request as forwarded: target and headers with secrets already markers,
    and ``body`` (by default the flow's, as sent and not yet redacted)."""
    request = flow.request
    scheme, host, port = info.called or (request.scheme, request.host, request.port)
    return WireRequest(
        request.method,
        scheme,
        host,
        port,
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
    scheme, host, number = info.called or (request.scheme, request.host, request.port)
    port = "" if number == {"http": 80, "https": 443}.get(scheme) else f":{number}"
    return f"{scheme}://{host}{port}{info.target}"


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
        reason=redactor.reason(response.reason, info.secrets),
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
