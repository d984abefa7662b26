"""Answers requests from the cassette, in recorded order, and explains every miss.

The n-th request with a given key gets the n-th recording of that key, so an agent
that polls a tool three times sees the three answers it saw before. Nothing here ever
lets a flow reach its upstream in ``replay`` mode: a hit is answered in the request
hook, a miss gets freezeframe's own error, and a recording that needs a real socket
(a truncated body) goes to the loopback re-enactor.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from mitmproxy import http

from addons import answers
from addons._flows import FlowInfo, canonical_of, display_url, info_of, response_from
from addons.reenact import TOKEN_HEADER, Reenactor, is_stream
from addons.rewrites import instant_rewrites, jsonrpc_id, rewrite_jsonrpc_id
from addons.state import INSTANT_PACE, Mode, RuntimeState
from canonicalize import Canonical, KeyConfig, nearest
from storage import Chunk, Exchange, Outcome, RecordedResponse, Store
from storage.redaction import Redactor

log = logging.getLogger("freezeframe.replay")

FAILURE_STATUS = 502
NEAREST_SHOWN = 3


class Replay:
    def __init__(
        self,
        store: Store,
        state: RuntimeState,
        key_config: KeyConfig,
        redactor: Redactor,
        reenactor: Reenactor,
    ) -> None:
        self._store = store
        self._state = state
        self._key_config = key_config
        self._redactor = redactor
        self._reenactor = reenactor
        self._stopped = False

    def done(self) -> None:
        self._stopped = True

    def request(self, flow: http.HTTPFlow) -> None:
        mode = self._state.mode
        if flow.response is not None or mode not in (Mode.REPLAY, Mode.AUTO):
            return
        if self._stopped:
            flow.response = answers.error(503, "freezeframe_stopping", "freezeframe is stopping")
            return
        info = info_of(flow)
        if info is None:
            return
        canonical = canonical_of(flow, info, self._key_config, self._redactor)
        for warning in canonical.warnings:
            log.warning("%s %s: %s", flow.request.method, display_url(flow, info), warning)
        occurrence = self._state.next_occurrence(info.cassette, canonical.key)
        exchange = self._store.lookup(info.cassette, canonical.key, occurrence)
        if exchange is None:
            if mode is Mode.REPLAY:
                flow.response = self._miss(flow, info, canonical, occurrence)
            return
        info.served = exchange
        log.debug("hit %s #%d for %s", info.cassette, exchange.seq, display_url(flow, info))
        recorded = exchange.response
        if recorded is None:
            flow.response = answers.upstream_failure(FAILURE_STATUS, exchange.error or "")
            return
        pace = self._state.pace
        recorded = self._answer_as(flow, exchange, recorded)
        headers = recorded.headers
        if pace == INSTANT_PACE:
            headers, rewrites = instant_rewrites(headers)
            for rewrite in rewrites:
                log.debug(
                    "#%d: %s %s -> %s at instant pace",
                    exchange.seq,
                    rewrite.header,
                    rewrite.recorded,
                    rewrite.replayed,
                )
        in_memory = recorded.body_ref is None
        paced = pace != INSTANT_PACE and is_stream(recorded)
        if exchange.outcome is Outcome.COMPLETE and in_memory and not paced:
            flow.response = response_from(recorded, headers)
        else:
            self._reenactor.route(flow, exchange, recorded, headers, pace)

    def _answer_as(
        self, flow: http.HTTPFlow, exchange: Exchange, recorded: RecordedResponse
    ) -> RecordedResponse:
        """A JSON-RPC answer must carry the live request's id (MCP clients match on it)."""
        live = jsonrpc_id(flow.request.get_content(strict=False) or b"")
        original = jsonrpc_id(exchange.request_body)
        if live is None or original is None or live == original or recorded.body_ref:
            return recorded
        if any(name.lower() == b"content-encoding" for name, _ in recorded.headers):
            return recorded
        body, edits = rewrite_jsonrpc_id(recorded.body, original, live)
        if not edits:
            return recorded
        chunks = tuple(
            Chunk(c.offset + sum(d for at, d in edits if at < c.offset), c.at)
            for c in recorded.chunks
        )
        headers = tuple(
            (name, str(len(body)).encode()) if name.lower() == b"content-length" else (name, value)
            for name, value in recorded.headers
        )
        return dataclasses.replace(recorded, body=body, chunks=chunks, headers=headers)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None and TOKEN_HEADER in flow.request.headers:
            flow.response.stream = True  # relay a re-enacted body as it comes, like the original

    def _miss(
        self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical, occurrence: int
    ) -> http.Response:
        cassette = info.cassette
        request = f"{flow.request.method} {display_url(flow, info)}"
        details: dict[str, Any] = {"cassette": cassette, "key": canonical.key}
        if not self._store.has_cassette(cassette):
            message = f"freezeframe: replay miss: cassette {cassette!r} does not exist"
            log.warning("%s: %s", request, message)
            return answers.error(
                answers.MISS_STATUS, "freezeframe_unknown_cassette", message, **details
            )
        recorded = self._store.count(cassette, canonical.key)
        details["occurrence"] = occurrence + 1
        details["recorded"] = recorded
        if recorded:
            message = (
                f"freezeframe: replay miss in cassette {cassette!r}: {request} was recorded "
                f"{recorded} time(s) and all were already served (this is occurrence "
                f"{occurrence + 1}); replay never forwards, so re-record or switch to auto"
            )
        else:
            near = self._nearest(flow, info, canonical)
            details["nearest"] = near
            message = (
                f"freezeframe: replay miss in cassette {cassette!r}: no recording of {request}"
            )
            if near:
                first = near[0]
                paths = ", ".join(d["path"] for d in first["differences"][:5]) or "nothing"
                message += f"; nearest is #{first['seq']} {first['request']}, differing at {paths}"
            else:
                message += "; the cassette has no recordings to compare with"
        log.warning("%s (key %s)", message, canonical.key[:16])
        return answers.error(answers.MISS_STATUS, "freezeframe_replay_miss", message, **details)

    def _nearest(
        self, flow: http.HTTPFlow, info: FlowInfo, canonical: Canonical
    ) -> list[dict[str, Any]]:
        path = info.target.partition("?")[0]
        candidates = self._store.candidates(
            info.cassette, flow.request.method, flow.request.host, path
        )
        ranked = nearest(canonical.form, ((c, c.canonical) for c in candidates), NEAREST_SHOWN)
        return [
            {
                "seq": candidate.seq,
                "request": f"{candidate.method} {candidate.url}",
                "key": candidate.key,
                "differences": [
                    {"path": d.path, "live": d.live, "recorded": d.recorded} for d in diffs
                ],
            }
            for candidate, diffs in ranked
        ]
