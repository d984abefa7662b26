"""Tees every forwarded exchange into the store, byte-exact and as it streams.

The response is never buffered for the client's sake: ``flow.response.stream`` is a
tee that hands each chunk on unchanged and notes its offset and arrival time. Neither
is a request body too large to hold (see ``addons.uploads.Upload``): its tee, set in the
``requestheaders`` hook, forwards it as it arrives while hashing it and spilling it to
the store, and the request is keyed and given its slot when the body has ended. Every
body, either way, is read, redacted and stored by its owner (storage.inflight); the hooks
here only feed it and build the record from what lands. Failures
are recorded like answers, because a 429 with a half-written body is exactly what a
user will later want to see again. The store write itself happens in the store's
writer (a process of its own by default); the request path only builds a record and hands
it over, unread: its facts and triage's signals are read there (evidence.reading_in).
"""

from __future__ import annotations

import asyncio
import logging
import time

from mitmproxy import http

from freezeframe.addons import annotate, websocket
from freezeframe.addons._flows import (
    FlowInfo,
    canonical_of,
    display_url,
    info_of,
    recorded_response,
    request_view,
    stored_request,
)
from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.addons.uploads import RequestBody, begin_upload, upload_canonical, upload_of
from freezeframe.canonicalize import KeyConfig, RequestView
from freezeframe.evidence.recording import new_exchange
from freezeframe.storage import (
    Exchange,
    NewExchange,
    Origin,
    Outcome,
    RecordStore,
    Slot,
    StoreError,
)
from freezeframe.storage.inflight import Body, Landed
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
"""Once an answer spills (past storage.inflight.LARGE_BODY), a chunk starts a new timing entry only
this many bytes after the last."""
TIMED_CHUNKS = 1024
"""The first this many chunks of an answer each get a timing entry; after them a chunk starts
a new one only PACED_GAP after the last (or PACED_STEP bytes, as a spilled answer)."""
PACED_GAP = 0.05
"""Seconds: a long answer's pacing kept to a twentieth of a second, the rate a reader of a
streamed answer notices; a proxy relays a 1 MB answer in 1-byte chunks in minutes, so a
finer step still made tens of thousands of entries."""


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


def _listening_stream(flow: http.HTTPFlow) -> bool:
    """Whether the answer is MCP's standalone GET stream (streamable HTTP, a request with
    its session id): the server's channel for what it may send unasked, which the client
    waits on for nothing, so closing it (the TypeScript SDK's ``client.close()``, right
    after its headers) is the client's doing, never an upstream's silence."""
    request, response = flow.request, flow.response
    return (
        request.method == "GET"
        and "mcp-session-id" in request.headers
        and response is not None
        and response.headers.get("content-type", "").startswith("text/event-stream")
    )


class _Recording:
    """One exchange on its way through the proxy; the tee is its answer's stream callable.

    The tee hands each chunk on unchanged, notes its offset and arrival time, and feeds it
    to the answer's ``Body`` (storage.inflight), which holds it while it is small and spills it
    to the store past LARGE_BODY, redacted in fixed blocks, so recording a large download
    costs the proxy no more memory than a small one. Once it spills the pacing is kept per
    ``PACED_STEP`` bytes rather than per chunk: a timing entry per chunk grew by about 2 MB
    a gigabyte (a 10 GB download, 21 MB). Past ``TIMED_CHUNKS`` chunks a new entry also
    needs ``PACED_GAP`` since the last: a 1 MB answer in 1-byte chunks made a million entries
    (+372 MB in the proxy, +260 MB in the writer, +26 MB stored); the entries now grow with
    the answer's duration, never with how finely it is cut.
    """

    __slots__ = (
        "flow",
        "info",
        "slot",
        "upload",
        "answer",
        "chunks",
        "started",
        "upstream_headers",
    )

    def __init__(
        self,
        flow: http.HTTPFlow,
        info: FlowInfo,
        slot: Slot | None,
        upload: RequestBody | None = None,
    ) -> None:
        self.flow = flow
        self.info = info
        self.slot = slot  # None until a streamed request body has ended
        self.upload = upload
        self.answer: Body | None = None  # from the answer's head on
        self.chunks: list[tuple[int, float]] = []
        self.started = flow.request.timestamp_start
        # The response's headers as the upstream sent them, before any annotation.
        self.upstream_headers: tuple[tuple[bytes, bytes], ...] | None = None

    def tee(self, data: bytes) -> bytes:
        answer = self.answer
        assert answer is not None
        if data:
            chunks = self.chunks
            if answer.spilled:
                if answer.size - chunks[-1][0] >= PACED_STEP:
                    chunks.append((answer.size, time.time() - self.started))
            elif len(chunks) < TIMED_CHUNKS:
                chunks.append((answer.size, time.time() - self.started))
            else:
                at = time.time() - self.started
                if at - chunks[-1][1] >= PACED_GAP or answer.size - chunks[-1][0] >= PACED_STEP:
                    chunks.append((answer.size, at))
            answer.feed(data)
        return data


class Record:
    def __init__(
        self,
        store: RecordStore,
        state: RuntimeState,
        key_config: KeyConfig,
        redactor: Redactor,
        *,
        strict: bool = False,
    ) -> None:
        self._store = store
        self._strict = strict  # --durability strict: an answer ends once it is committed
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
            flow.request.headers.fields,
            spill=self._store.blob_writer,
            large=upload.large,
        )
        recording = _Recording(flow, info, None, body)
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
        self._inflight[flow.id] = _Recording(flow, info, slot)

    def _copy(self, flow: http.HTTPFlow, info: FlowInfo, served: Exchange, into: str) -> None:
        """A replayed answer joins the new run (--record-into) as the recording it came
        from: this request (as sent now, keyed now), the source's answer, timing and outcome
        exactly, and an Origin naming the source, so the new cassette replays on its own."""
        canonical = info.canonical
        assert canonical is not None  # replay keyed it to find ``served``
        request, request_body_ref = stored_request(flow, info)
        try:
            slot = self._store.reserve(into, canonical.key)
            self._store.submit(
                new_exchange(
                    into,
                    request,
                    canonical,
                    self._view(flow, info),
                    slot=slot,
                    request_body_ref=request_body_ref,
                    started_at=flow.request.timestamp_start,
                    duration=served.recorded.duration,
                    response=served.recorded.response,
                    outcome=served.recorded.outcome,
                    error=served.recorded.error,
                    context=info.context,
                    messages=served.recorded.messages,
                    origin=Origin(
                        "replayed",
                        served.recorded.cassette,
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
        answer = served.recorded.response
        self._state.tally.recorded(
            served.recorded.outcome.value,
            served.recorded.host,
            None if answer is None else answer.status,
        )
        log.info(
            "recorded %s#%d %s %s as replayed from %s#%d",
            into,
            slot.seq,
            flow.request.method,
            display_url(flow, info),
            served.recorded.cassette,
            served.seq,
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        recording = self._inflight.get(flow.id)
        if recording is not None:
            recording.upstream_headers = flow.response.headers.fields
            recording.answer = self._answer_body(flow, recording.info, recording.upstream_headers)
            flow.response.stream = recording.tee
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
        elif message == CLIENT_CLOSED and (
            _read_and_closed(recording, flow) or _listening_stream(flow)
        ):
            outcome = Outcome.CLIENT_CLOSED
        else:
            outcome = Outcome.TRUNCATED
        self._submit(recording, outcome, message)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        recording = self._inflight.pop(flow.id, None)
        if recording is not None:
            self._submit(recording, *websocket.ending(flow))

    def done(self) -> None:
        self.stopping()

    def stopping(self) -> None:
        """The proxy is stopping: what is in flight is recorded as cut off by the stop, before
        the stop closes its connections (which would read as the client's doing)."""
        self._stopped = True
        for recording in list(self._inflight.values()):
            self._submit(recording, Outcome.INCOMPLETE, STOPPED)
        self._inflight.clear()

    @staticmethod
    def _view(flow: http.HTTPFlow, info: FlowInfo) -> RequestView:
        """The request the key was computed from; a streamed body is not held, so for
        one the facts come from its headers alone."""
        if info.view is not None:
            return info.view
        return request_view(flow, info, b"")

    def _answer_body(
        self, flow: http.HTTPFlow, info: FlowInfo, headers: tuple[tuple[bytes, bytes], ...]
    ) -> Body:
        """The owner of an answer's body (storage.inflight): spilled past LARGE_BODY, and
        scrubbed of what the request's secrets would look like echoed back."""
        return Body(
            self._redactor,
            info.secrets,
            headers,
            spill=self._store.blob_writer,
            what="answer",
            whole_secret=(flow.request.method, info.target),
        )

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
        response, answer = None, None
        if flow.response is not None:
            landed = self._landed_answer(recording)
            body = landed.stored
            if landed.ref is None:
                body = self._redactor.answer(flow.request.method, info.target, body)
            chunks = tuple(recording.chunks)
            if landed.reencoded:  # its new bytes share no offsets with those that arrived
                chunks = chunks[:1] and ((0, chunks[0][1]),)
            response = recorded_response(
                flow,
                info,
                body,
                landed.ref,
                chunks,
                self._redactor,
                landed.headers(recording.upstream_headers or flow.response.headers.fields),
            )
            answer = landed.decoded
        request, request_body_ref = stored_request(flow, info)
        return new_exchange(
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
            decoded_answer=answer,
            read_later=True,  # facts and signals: by the store's writer, off the event loop
        )

    def _landed_answer(self, recording: _Recording) -> Landed:
        """The answer's body as it lands; one that did not stream through the tee (it came
        whole) is fed to its ``Body`` whole."""
        response = recording.flow.response
        assert response is not None
        if recording.answer is None:
            recording.answer = self._answer_body(
                recording.flow, recording.info, response.headers.fields
            )
        if not recording.chunks and response.raw_content:
            recording.answer.feed(response.raw_content)
        return recording.answer.end()
