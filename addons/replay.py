"""Answers requests from the cassette, in recorded order, and explains every miss.

The n-th request with a given key gets the n-th recording of that key, so an agent
that polls a tool three times sees the three answers it saw before. Nothing here ever
lets a flow reach its upstream in ``replay`` mode: a hit is answered in the request
hook, a miss gets freezeframe's own error, and a recording that needs a real socket
(a truncated body, a WebSocket's conversation) goes to the loopback re-enactor. So
does a request whose body is too large to hold, before its body arrives: the
re-enactor reads it and asks this addon what to answer once it has ended.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from mitmproxy import http

from freezeframe.addons import annotate, answers
from freezeframe.addons._flows import (
    FlowInfo,
    canonical_of,
    display_url,
    info_of,
    response_from,
)
from freezeframe.addons.reenact import TOKEN_HEADER, Answer, Reenactor, Staged, is_stream
from freezeframe.addons.state import INSTANT_PACE, Mode, RuntimeState
from freezeframe.addons.uploads import RequestBody, begin_upload, upload_canonical, upload_of
from freezeframe.addons.websocket import is_websocket
from freezeframe.canonicalize import Canonical, KeyConfig, canonicalize, nearest
from freezeframe.canonicalize.drift import described, drift_values, drifted
from freezeframe.canonicalize.providers import provider_of
from freezeframe.evidence.response_ids import is_responses_path, replaced_ids
from freezeframe.evidence.rewrites import (
    JSONRPC_ID,
    instant_rewrites,
    jsonrpc_id,
    jsonrpc_rewritable,
    rewrite_jsonrpc_id,
)
from freezeframe.storage import (
    Chunk,
    Difference,
    Exchange,
    Miss,
    Nearest,
    Outcome,
    RecordedResponse,
    ReplayStore,
    StoreError,
)
from freezeframe.storage.redaction import Redactor
from freezeframe.storage.sent import SKIPPED, sent_digest
from freezeframe.whatif.perturb import Perturbed, Perturber
from freezeframe.whatif.perturb import Request as PerturbedRequest
from freezeframe.whatif.suggest import from_miss

log = logging.getLogger("freezeframe.replay")

FAILURE_STATUS = 502
#: mitmproxy's word for a client that closed its connection before any answer came.
CLIENT_GAVE_UP = "Client disconnected."
NEAREST_SHOWN = 3


@dataclasses.dataclass(frozen=True, slots=True)
class _KeyedInFull:
    """A request replay did not answer by its bytes, to be keyed in full and answered (or
    missed) as any other; ``claimed`` is the position its bytes' key claimed and found no
    recording at (all were served), which the full key takes over when it is the same key,
    so that one request claims one position."""

    claimed: tuple[str, int] | None = None


_UNKNOWN_BYTES = _KeyedInFull()


class Replay:
    def __init__(
        self,
        store: ReplayStore,
        state: RuntimeState,
        key_config: KeyConfig,
        redactor: Redactor,
        reenactor: Reenactor,
        admin: str,
        perturber: Perturber | None = None,
    ) -> None:
        self._store = store
        self._perturber = perturber
        self._admin = admin  # host:port of the admin API, named in miss messages
        self._state = state
        self._key_config = key_config
        self._redactor = redactor
        self._reenactor = reenactor
        self._stopped = False
        self._generation = state.generation
        self._loaded: set[str] = set()  # the cassettes preloaded since the last unload
        keyed = set(key_config.key_headers)
        for rule in key_config.rules.rules:
            keyed |= rule.key_headers
        # A header left out of the sent digest that the configuration keys: two requests
        # alike in every other byte are different questions, so every request is keyed.
        self._by_bytes = not {name.encode() for name in keyed} & SKIPPED

    def running(self) -> None:
        """Load the default cassette's recordings before the first request needs them."""
        if self._state.mode in (Mode.REPLAY, Mode.AUTO):
            self._preload(self._state.cassette)

    def done(self) -> None:
        self._stopped = True

    def _preload(self, cassette: str) -> None:
        """Have the store answer ``cassette``'s lookups from memory (Store.preload); after
        replay started from the top, everything is read again. A failure only costs speed:
        lookup() reads the store itself, and reports the failure if it persists."""
        generation = self._state.generation
        if generation != self._generation:
            self._generation = generation
            self._loaded.clear()
            self._store.unload()
        if cassette in self._loaded:
            return
        try:
            held = self._store.preload(cassette)
        except StoreError as exc:
            log.warning("cannot load cassette %r for replay: %s", cassette, exc)
            return
        self._loaded.add(cassette)
        log.debug("cassette %r loaded for replay: %d recordings held in all", cassette, held)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """A request whose body is too large to hold is answered as its body streams.

        It goes to the re-enactor before its body arrives, so that the body is read (and
        hashed) there instead of being buffered here, and nothing reaches the upstream.
        Its replay position is claimed when its body has ended, as record reserves its
        slot then (addons.record), so identical uploads replay in the order they ended.
        """
        upload = begin_upload(flow)
        if upload is None or upload.routed:
            return
        if upload.info is None:  # refused (a bad cassette name): drain the body, then say so
            refusal = flow.response
            assert refusal is not None
            flow.response = None
            upload.route(flow)
            body = RequestBody(self._redactor, (), large=True)
            self._reenactor.route_upload(flow, body, lambda _: refusal)
            return
        if upload.info.mode is not Mode.REPLAY:
            return  # record, auto and passthrough forward it as it streams (addons.record)
        upload.route(flow)
        body = RequestBody(
            self._redactor, upload.info.secrets, flow.request.headers.fields, large=upload.large
        )
        self._reenactor.route_upload(flow, body, lambda body: self._answer_upload(flow, body))

    def _answer_upload(self, flow: http.HTTPFlow, body: RequestBody) -> Answer:
        """What the re-enactor answers a streamed request with, once its body has ended."""
        upload = upload_of(flow)
        assert upload is not None and upload.info is not None
        info = upload.info
        upload.restore_origin(flow)
        canonical = upload_canonical(flow, info, self._key_config, self._redactor, body)
        self._warn(flow, info, canonical)
        if self._stopped:
            return answers.error(503, "freezeframe_stopping", "freezeframe is stopping")
        # Routed in replay mode: even if the mode has changed since, it can no longer be
        # forwarded, so a miss is a miss (even on a live route under --after-miss live).
        answer = self._answer(flow, info, canonical, Mode.REPLAY, can_forward=False)
        assert answer is not None and not isinstance(answer, _KeyedInFull)
        if isinstance(answer, Staged) and self._direct(answer, info):
            return dataclasses.replace(answer, pace=INSTANT_PACE)
        return answer

    def request(self, flow: http.HTTPFlow) -> None:
        if upload_of(flow) is not None:
            return  # its body streamed: answered by the re-enactor, or forwarded (record)
        info = info_of(flow)
        if info is None or flow.response is not None or info.mode not in (Mode.REPLAY, Mode.AUTO):
            return
        mode = info.mode
        if self._stopped:
            flow.response = answers.error(503, "freezeframe_stopping", "freezeframe is stopping")
            return
        try:
            answer = self._answer_sent(flow, info, mode)
            if isinstance(answer, _KeyedInFull):
                canonical = canonical_of(flow, info, self._key_config, self._redactor)
                self._warn(flow, info, canonical)
                recorded = self._as_recorded(info, canonical)
                claimed = None
                if answer.claimed is not None:
                    key, claimed = answer.claimed
                    if key != recorded.key:
                        self._state.give_back(info.cassette, key, claimed)
                        claimed = None
                answer = self._answer(flow, info, recorded, mode, claimed=claimed)
        except Exception as exc:
            # mitmproxy logs an addon's exception and carries on, which here would mean
            # forwarding the request upstream. Replay must never do that, so any failure
            # to answer (a store that went away, a bug) is answered as freezeframe's error.
            flow.response = self._failed(flow, info, exc)
            return
        if isinstance(answer, http.Response):
            flow.response = answer
        elif isinstance(answer, Staged):
            if answer.response is not None and self._direct(answer, info):
                flow.response = response_from(answer.response, answer.headers)
            else:
                self._reenactor.route(
                    flow, answer.exchange, answer.response, answer.headers, answer.pace
                )

    def _answer_sent(
        self, flow: http.HTTPFlow, info: FlowInfo, mode: Mode
    ) -> Answer | _KeyedInFull | None:
        """The answer to a request sent as the very bytes of a recording (storage.sent),
        found before its body is decoded or parsed; ``_KeyedInFull`` for any other. A
        request copied into a new run (``--record-into``) is keyed in full: it is stored
        under its own key."""
        if not self._by_bytes or info.decision.record_into is not None:
            return _UNKNOWN_BYTES
        self._preload(info.cassette)
        request = flow.request
        digest = sent_digest(
            request.method,
            request.scheme,
            request.host,
            request.port,
            request.path,
            request.headers.fields,
            request.raw_content or b"",
        )
        key = self._store.key_sent(info.cassette, digest)
        if key is None:
            return _UNKNOWN_BYTES
        return self._answer(flow, info, key, mode)

    def _as_recorded(self, info: FlowInfo, canonical: Canonical) -> Canonical:
        """The key the recorded run gave this request: where it names ids a live answer of
        this replay minted (a Responses ``previous_response_id``), the recorded ids they
        stand for (evidence.response_ids). ``info.canonical`` stays the request's own key,
        under which ``--record-into`` keeps it, so the new run replays on its own."""
        if info.view is None:
            return canonical
        view = self._state.response_ids(info.cassette).recorded_view(info.view)
        return canonical if view is None else canonicalize(view, self._key_config)

    def _learn_replaced_ids(self, flow: http.HTTPFlow, info: FlowInfo, exchange: Exchange) -> None:
        """A fork's answer that replaced the recorded one (``resend --fork``, ``edit``) may
        mint new Responses ids, which the agent names next while the fork's later requests,
        copied from the recording, name the old ones: the new ids stand for the old as a
        ``--live`` answer's do (addons.live_ids)."""
        origin = exchange.recorded.origin
        assert origin is not None
        if flow.request.method != "POST" or not is_responses_path(info.target):
            return
        try:
            source = self._store.exchange(origin.cassette, origin.seq)
        except StoreError as exc:
            log.warning("%s#%d: cannot map its new ids: %s", info.cassette, exchange.seq, exc)
            return
        pairs = replaced_ids(source, exchange)
        for pair in self._state.response_ids(info.cassette).learn(pairs):
            log.info(
                "%s %s: %s#%d's new %s stands for %s of %s#%d",
                flow.request.method,
                display_url(flow, info),
                info.cassette,
                exchange.seq,
                pair.live,
                pair.recorded,
                origin.cassette,
                origin.seq,
            )

    def _failed(self, flow: http.HTTPFlow, info: FlowInfo, exc: Exception) -> http.Response:
        request = f"{flow.request.method} {display_url(flow, info)}"
        if isinstance(exc, StoreError):
            log.error("%s: cannot replay: %s", request, exc)
            message = f"freezeframe: cannot replay {request}: {exc}"
            return answers.error(503, "freezeframe_store_unavailable", message)
        log.exception("%s: cannot replay", request)
        message = f"freezeframe: cannot replay {request}: internal error ({type(exc).__name__})"
        return answers.error(500, "freezeframe_internal_error", message)

    def _warn(self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical) -> None:
        for warning in canonical.warnings:
            log.warning("%s %s: %s", flow.request.method, display_url(flow, info), warning)

    def _answer(
        self,
        flow: http.HTTPFlow,
        info: FlowInfo,
        canonical: Canonical | str,
        mode: Mode,
        *,
        can_forward: bool = True,
        claimed: int | None = None,
    ) -> Answer | _KeyedInFull | None:
        """The recording to serve, freezeframe's own answer, or None: forward (auto, or a
        live route whose run has just missed). ``canonical`` is a key alone for a request
        found by its bytes (``_answer_sent``): it has no drift, and when no recording is
        left for it, it is keyed in full (``_KeyedInFull``). ``claimed``: the position this
        request has claimed already (``_KeyedInFull``), so it claims no other."""
        self._preload(info.cassette)
        key = canonical if isinstance(canonical, str) else canonical.key
        if claimed is None:
            occurrence = self._state.next_occurrence(info.cassette, key)
        else:
            occurrence = claimed
        try:
            exchange = self._store.lookup(info.cassette, key, occurrence)
        except StoreError:
            # Unanswered, so not served: the retry after the store is back gets this one.
            self._state.give_back(info.cassette, key, occurrence)
            raise
        if exchange is None:
            if isinstance(canonical, str):
                return _KeyedInFull((key, occurrence))
            if mode is not Mode.REPLAY:
                return None
            self._state.diverge(info.run)
            forward = info.decision.on_miss
            if forward is None or not can_forward:
                return self._miss(flow, info, canonical, occurrence)
            log.info(
                "%s %s: no recording, and the run has left the recording: forwarded "
                "(--after-miss live)",
                flow.request.method,
                display_url(flow, info),
            )
            info.decision = forward
            return None
        info.served = exchange
        if exchange.recorded.origin is not None and exchange.recorded.origin.kind == "edited":
            self._learn_replaced_ids(flow, info, exchange)
        drift, values = (
            ((), ()) if isinstance(canonical, str) else self._drift(flow, info, canonical, exchange)
        )
        self._state.tally.replayed(info.cassette, bool(drift))
        recorded = exchange.recorded.response
        perturbed = self._perturb(flow, info, key, exchange, occurrence)
        if perturbed is not None:
            exchange, recorded = perturbed.exchange, perturbed.response
            info.served, info.perturbed = exchange, perturbed
        self._state.journal.add(
            "hit",
            info.cassette,
            exchange.seq,
            flow.request.method,
            display_url(flow, info),
            status=recorded.status if recorded is not None else None,
            drift=drift,
            perturbed=perturbed.description if perturbed is not None else None,
            drift_values=values,
        )
        log.info(
            "replayed %s#%d for %s %s: %s %s",
            info.cassette,
            exchange.seq,
            flow.request.method,
            display_url(flow, info),
            recorded.status if recorded is not None else "-",
            exchange.recorded.outcome.value,
        )
        if recorded is None:
            if exchange.recorded.error == CLIENT_GAVE_UP:
                # No answer ever came and the client stopped waiting: be as silent again.
                return Staged(exchange, None, (), self._state.pace)
            address = f"{exchange.recorded.host}:{exchange.recorded.port}"
            failure = answers.upstream_failure(
                FAILURE_STATUS, exchange.recorded.error or "", address
            )
            if self._state.annotate:
                failure.headers.fields += annotate.hit(info.cassette, exchange.seq, drift)
            return failure
        pace = self._state.pace
        if perturbed is not None and perturbed.pace != 1.0:
            pace = (pace or 1.0) * perturbed.pace
        recorded, rewritten = self._answer_as(info, exchange, recorded)
        if exchange.recorded.outcome is Outcome.CLIENT_CLOSED:
            recorded = _ended_where_read(recorded)
        headers = recorded.headers
        if pace == INSTANT_PACE:
            headers, rewrites = instant_rewrites(headers)
            for rewrite in rewrites:
                rewritten.append(rewrite.header)
                log.debug(
                    "#%d: %s %s -> %s at instant pace",
                    exchange.seq,
                    rewrite.header,
                    rewrite.recorded,
                    rewrite.replayed,
                )
        if self._state.annotate:
            headers = (*headers, *annotate.hit(info.cassette, exchange.seq, drift, rewritten))
            if perturbed is not None:
                headers = (*headers, *annotate.perturbed(perturbed.description))
        return Staged(exchange, recorded, tuple(headers), pace)

    def _perturb(
        self, flow: http.HTTPFlow, info: FlowInfo, key: str, exchange: Exchange, occurrence: int
    ) -> Perturbed | None:
        """The recording as ``--perturb`` changes it, if it does. A failure is served in
        place of the recording, which stays where it was for the client's retry."""
        if self._perturber is None or exchange.recorded.response is None:
            return None
        request = PerturbedRequest(
            flow.request.host,
            flow.request.port,
            info.target.partition("?")[0],
            anthropic="anthropic-version" in flow.request.headers,
        )
        perturbed = self._perturber.perturb(exchange, exchange.recorded.response, request)
        if perturbed is None:
            return None
        if perturbed.failure:
            self._state.give_back(info.cassette, key, occurrence)
        log.info(
            "perturbed %s#%d for %s %s: %s (%s)",
            info.cassette,
            exchange.seq,
            flow.request.method,
            display_url(flow, info),
            perturbed.description,
            perturbed.perturbation.text,
        )
        return perturbed

    def _drift(
        self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical, exchange: Exchange
    ) -> tuple[tuple[str, ...], tuple[tuple[str, str, str], ...]]:
        """The stripped parts in which this hit's request differs from the recording's, and
        for each JSON body field among them, its recorded and live values.

        The answer is served all the same (the key says it is the same situation), but the
        difference is logged, noted on the exchange, where ``show`` lists it, and goes with
        the hit's event (``/api/events``, ``exec``'s summary): a stripped field that now
        carries what the recording never had may be what decides the agent's branch. Both
        values are read from redacted bodies (the stored one, and the live one as keyed).
        Recordings made before freezeframe kept stripped digests have nothing to compare
        with until ``freezeframe rekey`` computes them.
        """
        if exchange.recorded.stripped is None:
            return (), ()
        paths = drifted(canonical.stripped, exchange.recorded.stripped)
        if not paths:
            return (), ()
        live = info.view.body if info.view is not None else b""
        values = []
        for path in paths:
            found = drift_values(path, live, exchange.recorded.request_body)
            if found is not None:
                values.append((path, found[0], found[1]))
        shown = {path: (recorded, now) for path, recorded, now in values}
        log.warning(
            "%s %s: replayed %s#%d, but the request drifted from the recording in %s",
            flow.request.method,
            display_url(flow, info),
            info.cassette,
            exchange.seq,
            ", ".join(described(path, shown.get(path)) for path in paths),
        )
        self._store.note_drift(info.cassette, exchange.seq, paths, info.context)
        return paths, tuple(values)

    @staticmethod
    def _direct(staged: Staged, info: FlowInfo) -> bool:
        """Whether the recording can be served as a finished response (no re-enactment)."""
        if info.perturbed is not None and info.perturbed.played:
            return False  # its timing or its end is the perturbation
        if staged.response is None or is_websocket(staged.response):
            return False  # a WebSocket's conversation is re-enacted (addons.wsreenact)
        in_memory = staged.response.body_ref is None
        paced = staged.pace != INSTANT_PACE and is_stream(staged.response)
        served_whole = staged.exchange.recorded.outcome in (Outcome.COMPLETE, Outcome.CLIENT_CLOSED)
        return served_whole and in_memory and not paced

    def _answer_as(
        self, info: FlowInfo, exchange: Exchange, recorded: RecordedResponse
    ) -> tuple[RecordedResponse, list[str]]:
        """A JSON-RPC answer must carry the live request's id (MCP clients match on it),
        read from the request as it was keyed (a streamed body is not held: it has none).

        Returns the response to serve and the names of what was rewritten in it.
        """
        original = jsonrpc_rewritable(exchange.recorded.request_body, recorded)
        if original is None:
            return recorded, []
        live = jsonrpc_id(info.view.body if info.view is not None else b"")
        if live is None or live == original:
            return recorded, []
        body, edits = rewrite_jsonrpc_id(recorded.body, original, live)
        chunks = tuple(
            Chunk(c.offset + sum(d for at, d in edits if at < c.offset), c.at)
            for c in recorded.chunks
        )
        headers = tuple(
            (name, str(len(body)).encode()) if name.lower() == b"content-length" else (name, value)
            for name, value in recorded.headers
        )
        served = dataclasses.replace(recorded, body=body, chunks=chunks, headers=headers)
        return served, [JSONRPC_ID]

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            return
        upload = upload_of(flow)
        if TOKEN_HEADER in flow.request.headers or (upload is not None and upload.routed):
            flow.response.stream = True  # relay a re-enacted body as it comes, like the original

    def _miss(
        self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical, occurrence: int
    ) -> http.Response:
        """freezeframe's answer to a request with no recording, which is logged and kept
        in the store (Store.note_miss) as the client was answered."""
        cassette = info.cassette
        request = f"{flow.request.method} {display_url(flow, info)}"
        self._state.tally.missed(cassette)
        kind, recorded = "freezeframe_replay_miss", 0
        near: tuple[Nearest, ...] = ()
        rule: tuple[dict[str, Any], str] | None = None
        if not self._store.has_cassette(cassette):
            kind = "freezeframe_unknown_cassette"
            message = f"freezeframe: replay miss: cassette {cassette!r} does not exist"
            log.warning("%s: %s", request, message)
        else:
            recorded = self._store.count(cassette, canonical.key)
            if recorded:
                message = answers.miss_message(
                    cassette, request, recorded, occurrence + 1, (), self._admin, details=True
                )
            else:
                near = self._nearest(flow, info, canonical)
                message = answers.miss_message(
                    cassette, request, 0, occurrence + 1, near, self._admin, details=True
                )
                suggested = (
                    from_miss(flow.request.host, info.target, near[0].differences) if near else None
                )
                if suggested:
                    rule = (
                        suggested.rule,
                        f"; {suggested.where} looks generated on both sides: the rule "
                        f"[[rule]] {suggested.inline()} would have made this a hit "
                        "(`freezeframe rules suggest`)",
                    )
                    message += rule[1]
            log.warning("%s (key %s)", message, canonical.key[:16])
        self._state.journal.add(
            "miss",
            cassette,
            None,
            flow.request.method,
            display_url(flow, info),
            status=answers.MISS_STATUS,
            message=message,
        )
        miss = Miss(
            cassette=cassette,
            at=time.time(),
            kind=kind,
            method=flow.request.method,
            url=display_url(flow, info),
            key=canonical.key,
            occurrence=occurrence + 1,
            recorded=recorded,
            message=message,
            context=dict(info.context),
            nearest=near,
        )
        try:
            self._store.note_miss(miss)
        except StoreError as exc:  # the client still gets its explanation
            log.error("%s: the miss could not be kept: %s", request, exc)
        provider = provider_of(
            canonical.profile,
            flow.request.pretty_host,
            flow.request.path.partition("?")[0],
            flow.request.query.items(multi=True),
        )
        return self._annotated_miss(
            answers.miss(
                miss,
                request,
                self._admin,
                details=self._state.miss_details,
                provider=provider,
                rule=rule,
            ),
            cassette,
        )

    def _annotated_miss(self, response: http.Response, cassette: str) -> http.Response:
        if self._state.annotate:
            response.headers.fields += annotate.miss(cassette)
        return response

    def _nearest(
        self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical
    ) -> tuple[Nearest, ...]:
        path = info.target.partition("?")[0]
        candidates = self._store.candidates(
            info.cassette, flow.request.method, flow.request.host, path
        )
        ranked = nearest(canonical.form, ((c, c.canonical) for c in candidates), NEAREST_SHOWN)
        return tuple(
            Nearest(
                seq=candidate.seq,
                request=f"{candidate.method} {candidate.url}",
                key=candidate.key,
                differences=tuple(Difference(d.path, d.live, d.recorded) for d in diffs),
            )
            for candidate, diffs in ranked
        )


def _ended_where_read(recorded: RecordedResponse) -> RecordedResponse:
    """An answer the client closed early, framed to end where it was read: a Content-Length
    the upstream sent for the whole would leave a client that reads on waiting forever."""
    if recorded.body_ref is not None:
        return recorded
    length = str(len(recorded.body)).encode()
    headers = tuple(
        (name, length) if name.lower() == b"content-length" else (name, value)
        for name, value in recorded.headers
    )
    return dataclasses.replace(recorded, headers=headers)
