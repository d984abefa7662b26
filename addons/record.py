"""Tees every forwarded exchange into the store, byte-exact and as it streams.

The response is never buffered for the client's sake: ``flow.response.stream`` is a
tee that hands each chunk on unchanged and notes its offset and arrival time. Neither
is a request body too large to hold (see ``addons.uploads.Upload``): its tee, set in the
``requestheaders`` hook, forwards it as it arrives while hashing it and spilling it to
the store, and the request is keyed and given its slot when the body has ended. Failures
are recorded like answers, because a 429 with a half-written body is exactly what a
user will later want to see again. The store write itself happens on the store's
writer thread; the request path only builds a record and enqueues it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence

from mitmproxy import http

from freezeframe.addons import annotate, websocket
from freezeframe.addons._flows import (
    FlowInfo,
    canonical_of,
    display_url,
    info_of,
    recorded_response,
    request_body,
    request_view,
    wire_request,
)
from freezeframe.addons.encoded import scrub_encoded
from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.addons.uploads import (
    LARGE_BODY,
    RequestBody,
    begin_upload,
    upload_canonical,
    upload_of,
)
from freezeframe.canonicalize import KeyConfig, RequestView
from freezeframe.evidence.recording import new_exchange
from freezeframe.evidence.requests import WireRequest
from freezeframe.evidence.triage import RunReaders
from freezeframe.storage import (
    BlobRef,
    BlobWriter,
    Chunk,
    Exchange,
    NewExchange,
    Origin,
    Outcome,
    RecordedResponse,
    Slot,
    Store,
    StoreError,
)
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.record")

STOPPED = "the proxy was stopped while this exchange was in flight"
#: mitmproxy's word for a client that closed its connection (or stream) before the end.
CLIENT_CLOSED = "Client disconnected."
CLIENT_READ_GRACE_S = 1.0
"""A client that closes within this long of the last bytes it was sent closed because it
had read what it wanted; one that closes later gave up waiting on a silent upstream."""
DURABLE_WAIT_S = 30.0
"""How long --durability strict holds an answer's end for its commit."""


def _end_after_the_hook(flow: http.HTTPFlow) -> None:
    """Make the client know the answer is whole only from its end of message, which is sent
    after the ``response`` hook: HTTP/2 ends a stream that way anyway; an HTTP/1.1 answer of
    known length is sent chunked instead (transfer framing only: the bytes are the same, and
    the recording keeps the upstream's headers)."""
    response = flow.response
    assert response is not None
    if response.http_version != "HTTP/1.1" or flow.request.method == "HEAD":
        return
    if response.status_code in (204, 304) or "content-length" not in response.headers:
        return
    del response.headers["content-length"]
    response.headers["transfer-encoding"] = "chunked"


PACED_STEP = 1024 * 1024
"""Past LARGE_BODY, a chunk starts a new timing entry only this many bytes after the last."""


def _read_and_closed(recording: _Recording, flow: http.HTTPFlow) -> bool:
    """Whether a client's early close followed what it read (an MCP client closing the SSE
    answer it has its result from) rather than a wait for more (a read timeout on an
    upstream gone silent, which is the upstream's failure and is recorded ``truncated``)."""
    if flow.error is None:
        return False
    # Headers alone are no answer read: a client that closes before any body arrived was
    # waiting for it (a read timeout), however soon after the headers its timeout fell.
    last = recording.chunks[-1][1] if recording.chunks else None
    closed = flow.error.timestamp - recording.started
    return last is not None and closed - last <= CLIENT_READ_GRACE_S


class _Recording:
    """One exchange on its way through the proxy; the tee is its stream callable.

    A body is kept in memory until it passes ``LARGE_BODY``; from then on every chunk goes
    straight to a blob writer (hashed and compressed as it arrives), so recording a large
    download costs the proxy no more memory than a small one. Chunks are redacted one by
    one there, so a secret pattern split across two chunks of such a body is not caught.
    Past ``LARGE_BODY`` the pacing is kept per ``PACED_STEP`` bytes rather than per chunk:
    a timing entry per chunk grew by about 2 MB a gigabyte (a 10 GB download, 21 MB).
    """

    __slots__ = (
        "flow",
        "info",
        "slot",
        "upload",
        "body",
        "size",
        "chunks",
        "started",
        "spill",
        "store",
        "redactor",
        "upstream_headers",
    )

    def __init__(
        self,
        flow: http.HTTPFlow,
        info: FlowInfo,
        slot: Slot | None,
        store: Store,
        redactor: Redactor,
        upload: RequestBody | None = None,
    ) -> None:
        self.flow = flow
        self.info = info
        self.slot = slot  # None until a streamed request body has ended
        self.upload = upload
        self.store = store
        self.redactor = redactor
        self.body = bytearray()
        self.size = 0
        self.chunks: list[tuple[int, float]] = []
        self.started = flow.request.timestamp_start
        self.spill: BlobWriter | None = None
        # The response's headers as the upstream sent them, before any annotation.
        self.upstream_headers: tuple[tuple[bytes, bytes], ...] | None = None

    def tee(self, data: bytes) -> bytes:
        if data:
            if self.spill is None or self.size - self.chunks[-1][0] >= PACED_STEP:
                self.chunks.append((self.size, time.time() - self.started))
            self.size += len(data)
            if self.spill is None and self.size > LARGE_BODY:
                self.spill = self.store.blob_writer()
                self._spill(bytes(self.body))
                self.body = bytearray()
            if self.spill is None:
                self.body += data
            else:
                self._spill(data)
        return data

    def _spill(self, data: bytes) -> None:
        assert self.spill is not None
        self.spill.write(self.redactor.body(data, self.info.secrets))

    def body_and_ref(self) -> tuple[bytes, BlobRef | None]:
        if self.spill is None:
            return self.redactor.body(bytes(self.body), self.info.secrets), None
        return b"", self.spill.finish()


class Record:
    def __init__(
        self,
        store: Store,
        state: RuntimeState,
        key_config: KeyConfig,
        redactor: Redactor,
        *,
        strict: bool = False,
    ) -> None:
        self._store = store
        self._strict = strict  # --durability strict: an answer ends once it is committed
        self._readers = RunReaders()  # each run's failures, found as its exchanges come
        self._state = state
        self._key_config = key_config
        self._redactor = redactor
        self._inflight: dict[str, _Recording] = {}
        self._stopped = False

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """A request body too large to hold is forwarded as it arrives, through a tee.

        Its key needs the whole body, so its slot is reserved when the body has ended,
        not when the request arrived: a request the client sends while a large upload
        is still streaming can take an earlier position in the cassette than the upload.
        Replay claims occurrences at the same point (addons.replay), so the two agree.
        """
        upload = begin_upload(flow)
        if upload is None or upload.routed or upload.info is None or flow.response is not None:
            return
        mode = upload.info.mode
        if mode is Mode.REPLAY:
            return  # never forwarded: addons.replay routes it to the re-enactor
        if self._stopped or mode is Mode.PASSTHROUGH:
            flow.request.stream = True  # forwarded as it arrives, nothing kept
            return
        info = upload.info
        if mode is Mode.AUTO:  # its key is known only once it has been sent upstream
            log.info(
                "%s %s: body too large to hold, so auto mode forwards and records it "
                "without looking for a recording",
                flow.request.method,
                display_url(flow, info),
            )
        body = RequestBody(
            self._redactor,
            info.secrets,
            spill=self._store.blob_writer,
            large=upload.large,
            content_type=flow.request.headers.get("content-type", ""),
        )
        recording = _Recording(flow, info, None, self._store, self._redactor, body)
        self._inflight[flow.id] = recording

        def tee(data: bytes) -> bytes:
            if data:
                body.feed(data)
            else:  # mitmproxy's end of the body
                self._reserve(recording)
            return data

        flow.request.stream = tee

    def _reserve(self, recording: _Recording) -> None:
        """Key a streamed request and take its slot, once its body has ended (or, if it
        never will, as far as it came)."""
        body = recording.upload
        if recording.slot is not None or body is None:
            return
        flow, info = recording.flow, recording.info
        if not body.ended:
            # The exchange ended first. Over HTTP/2 an upstream may answer a whole body
            # before the client's end of stream arrives here; anything else is a cut.
            length = flow.request.headers.get("content-length", "")
            if not (length.isdigit() and body.size >= int(length)):
                log.info(
                    "%s %s: request body cut off after %d bytes; keyed by what arrived",
                    flow.request.method,
                    display_url(flow, info),
                    body.size,
                )
            body.end()
        canonical = upload_canonical(flow, info, self._key_config, self._redactor, body)
        for warning in canonical.warnings:
            log.warning("%s %s: %s", flow.request.method, display_url(flow, info), warning)
        recording.slot = self._store.reserve(info.record_cassette, canonical.key)

    def request(self, flow: http.HTTPFlow) -> None:
        if upload_of(flow) is not None:
            return  # its body streamed: keyed and reserved by the tee (or replayed)
        info = info_of(flow)
        if self._stopped or info is None:
            return
        if info.served is not None:
            if info.decision.record_into is not None:
                self._copy(flow, info, info.served, info.decision.record_into)
            return
        if flow.response is not None or info.mode not in (Mode.RECORD, Mode.AUTO):
            return
        canonical = canonical_of(flow, info, self._key_config, self._redactor)
        for warning in canonical.warnings:
            log.warning("%s %s: %s", flow.request.method, display_url(flow, info), warning)
        try:
            slot = self._store.reserve(info.record_cassette, canonical.key)
        except StoreError as exc:  # the proxy stays transparent; the loss is said loudly
            log.error("%s %s: NOT RECORDED: %s", flow.request.method, display_url(flow, info), exc)
            return
        self._inflight[flow.id] = _Recording(flow, info, slot, self._store, self._redactor)

    def _copy(self, flow: http.HTTPFlow, info: FlowInfo, served: Exchange, into: str) -> None:
        """A replayed answer joins the new run (--record-into) as the recording it came
        from: this request (as sent now, keyed now), the source's answer, timing and outcome
        exactly, and an Origin naming the source, so the new cassette replays on its own."""
        canonical = info.canonical
        assert canonical is not None  # replay keyed it to find ``served``
        try:
            slot = self._store.reserve(into, canonical.key)
            self._store.submit(
                new_exchange(
                    into,
                    self._stored_request(flow, info),
                    canonical,
                    self._view(flow, info),
                    slot=slot,
                    started_at=flow.request.timestamp_start,
                    duration=served.duration,
                    response=served.response,
                    outcome=served.outcome,
                    error=served.error,
                    context=info.context,
                    messages=served.messages,
                    origin=Origin(
                        "replayed",
                        served.cassette,
                        served.seq,
                        served.chain,
                        (f"perturbed: {info.perturbed.description}",) if info.perturbed else (),
                    ),
                )
            )
        except StoreError as exc:
            log.error(
                "%s %s: NOT COPIED into %r: %s",
                flow.request.method,
                display_url(flow, info),
                into,
                exc,
            )
            return
        answer = served.response
        self._state.tally.recorded(
            served.outcome.value, served.host, None if answer is None else answer.status
        )
        log.info(
            "recorded %s#%d %s %s as replayed from %s#%d",
            into,
            slot.seq,
            flow.request.method,
            display_url(flow, info),
            served.cassette,
            served.seq,
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        recording = self._inflight.get(flow.id)
        if recording is not None:
            flow.response.stream = recording.tee
            recording.upstream_headers = flow.response.headers.fields
            if self._strict:
                _end_after_the_hook(flow)
            if self._state.annotate and recording.slot is not None:
                headers = annotate.recorded(recording.info.record_cassette, recording.slot.seq)
                flow.response.headers.fields += headers
        elif flow.response.stream is False:
            flow.response.stream = True  # passthrough streams too; nothing to keep

    async def response(self, flow: http.HTTPFlow) -> None:
        """Runs before the answer's end reaches the client (the last chunk's terminator, or
        HTTP/2's end of stream), so ``--durability strict`` holds that end until the
        exchange is committed, and cuts the answer off if it cannot be."""
        if flow.websocket is not None:
            return  # a WebSocket is submitted with its messages when it ends
        recording = self._inflight.pop(flow.id, None)
        if recording is None:
            return
        if not self._strict:
            self._submit(recording, Outcome.COMPLETE, None)
            return
        exchange = self._exchange(recording, Outcome.COMPLETE, None)
        try:
            stored = await asyncio.to_thread(self._store.submit_durably, exchange, DURABLE_WAIT_S)
        except StoreError:
            stored = False
        self._recorded(recording, exchange)
        if not stored:
            log.error(
                "%s %s: not committed to the store, so the answer is cut off before its end "
                "(--durability strict)",
                flow.request.method,
                display_url(flow, recording.info),
            )
            flow.kill()

    def error(self, flow: http.HTTPFlow) -> None:
        recording = self._inflight.pop(flow.id, None)
        if recording is None:
            return
        message = flow.error.msg if flow.error else "unknown error"
        if flow.response is None:
            outcome = Outcome.FAILED
        elif message == CLIENT_CLOSED and _read_and_closed(recording, flow):
            outcome = Outcome.CLIENT_CLOSED
        else:
            outcome = Outcome.TRUNCATED
        self._submit(recording, outcome, message)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        recording = self._inflight.pop(flow.id, None)
        if recording is not None:
            self._submit(recording, *websocket.ending(flow))

    def done(self) -> None:
        self._stopped = True
        for recording in list(self._inflight.values()):
            self._submit(recording, Outcome.INCOMPLETE, STOPPED)
        self._inflight.clear()

    def _stored_request(self, flow: http.HTTPFlow, info: FlowInfo) -> WireRequest:
        """The request as stored: its body redacted, and encoded again when its compressed
        body hid a secret (addons.encoded)."""
        body = request_body(flow, self._redactor)
        found = scrub_encoded(self._redactor, body, info.request_headers, info.secrets)
        if found is None:
            return wire_request(flow, info, body)
        body, headers = found
        return dataclasses.replace(wire_request(flow, info, body), headers=headers)

    @staticmethod
    def _view(flow: http.HTTPFlow, info: FlowInfo) -> RequestView:
        """The request the key was computed from; a streamed body is not held, so for
        one the facts come from its headers alone."""
        if info.view is not None:
            return info.view
        return request_view(flow, info, b"")

    def _scrubbed(self, response: RecordedResponse, secrets: Sequence[bytes]) -> RecordedResponse:
        """The response, re-encoded if its compressed body hid a secret (addons.encoded).

        Its chunks then collapse into one, at the first chunk's time: the new bytes have
        no offsets in common with those that arrived.
        """
        if response.body_ref is not None:
            return response
        found = scrub_encoded(self._redactor, response.body, response.headers, secrets)
        if found is None:
            return response
        body, headers = found
        chunks = (Chunk(0, response.chunks[0].at),) if response.chunks else ()
        return dataclasses.replace(response, body=body, headers=headers, chunks=chunks)

    def _submit(self, recording: _Recording, outcome: Outcome, error: str | None) -> None:
        exchange = self._exchange(recording, outcome, error)
        self._store.submit(exchange)
        self._recorded(recording, exchange)

    def _recorded(self, recording: _Recording, exchange: NewExchange) -> None:
        flow, info = recording.flow, recording.info
        response = exchange.response
        self._state.tally.recorded(
            exchange.outcome.value, exchange.host, None if response is None else response.status
        )
        self._state.journal.add(
            "recorded",
            info.record_cassette,
            exchange.slot.seq,
            flow.request.method,
            display_url(flow, info),
            status=response.status if response is not None else None,
        )
        log.info(
            "recorded %s#%d %s %s %s %s %.0f ms%s",
            info.record_cassette,
            exchange.slot.seq,
            flow.request.method,
            display_url(flow, info),
            response.status if response is not None else "-",
            exchange.outcome.value,
            (exchange.duration or 0.0) * 1000,
            f": {exchange.error}" if exchange.error else "",
        )

    def _exchange(self, recording: _Recording, outcome: Outcome, error: str | None) -> NewExchange:
        """The exchange to store, as the flow went."""
        flow, info = recording.flow, recording.info
        self._reserve(recording)
        canonical = info.canonical
        assert canonical is not None and recording.slot is not None
        ended = flow.response.timestamp_end if flow.response else None
        if flow.websocket is not None:  # it lasted until it closed (addons.websocket)
            ended = flow.websocket.timestamp_end
        response = None
        if flow.response is not None:
            body, ref = recording.body_and_ref()
            if not recording.chunks and flow.response.raw_content:
                body = self._redactor.body(flow.response.raw_content, info.secrets)  # not streamed
            if ref is None:
                body = self._redactor.answer(flow.request.method, info.target, body)
            response = recorded_response(
                flow,
                info,
                body,
                ref,
                tuple(recording.chunks),
                self._redactor,
                recording.upstream_headers,
            )
            response = self._scrubbed(response, info.secrets)
        request_body_ref = None
        if recording.upload is None:
            request = self._stored_request(flow, info)
        elif (small := recording.upload.small) is not None:
            request = wire_request(flow, info, self._redactor.body(small, info.secrets))
        else:
            request, request_body_ref = wire_request(flow, info, b""), recording.upload.ref
        exchange = new_exchange(
            info.record_cassette,
            request,
            canonical,
            self._view(flow, info),
            slot=recording.slot,
            started_at=recording.started,
            duration=(ended or time.time()) - recording.started,
            response=response,
            outcome=outcome,
            error=self._redactor.text(error) if error else None,
            context=info.context,
            request_body_ref=request_body_ref,
            messages=websocket.transcript(flow, recording.started, self._redactor, info.secrets),
        )
        return self._readers.sign(exchange)
