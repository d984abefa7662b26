"""Pairs a live Responses API answer of a replay with the recorded one, id for id.

Under ``--live`` (or a ``[[route]]`` that forwards), a Responses request that the recording
has goes upstream and comes back with new ids; the agent's later requests name them, and
the frozen rest of the run would miss. This addon reads the ids of such a live answer as it
streams by (a copy of at most ``TAPPED`` bytes; the client's stream is untouched), finds the
recorded answer to the same request, and teaches the replay's ``IdMap`` which live id stands
for which recorded one (evidence.response_ids); replay then keys later requests as if they
named the recorded ids. The log says each pair as it is learned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mitmproxy import http

from freezeframe.addons._flows import canonical_of, display_url, info_of
from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.canonicalize import KeyConfig, canonicalize
from freezeframe.evidence.response_ids import answer_ids, is_responses_path, pair_ids
from freezeframe.providers.bodies import media_type, response_body
from freezeframe.storage import ReplayStore, StoreError
from freezeframe.storage.encodings import decode_body
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.replay")

TAPPED = 8 * 1024 * 1024
"""The most of a live answer kept to read its ids: a model's answer is far smaller."""
_FORWARDED = (Mode.RECORD, Mode.PASSTHROUGH, Mode.AUTO)


class LiveIds:
    def __init__(
        self, store: ReplayStore, state: RuntimeState, key_config: KeyConfig, redactor: Redactor
    ) -> None:
        self._store = store
        self._state = state
        self._key_config = key_config
        self._redactor = redactor
        self._taps: dict[str, bytearray] = {}

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Runs after record's, so the copy wraps whatever stream record set up."""
        info = info_of(flow)
        response = flow.response
        if info is None or response is None or self._state.mode is not Mode.REPLAY:
            return
        if info.mode not in _FORWARDED or info.served is not None:
            return
        if flow.request.method != "POST" or not is_responses_path(info.target):
            return
        tap = self._taps[flow.id] = bytearray()
        inner = response.stream
        if inner is False:
            return  # buffered: read whole in ``response``

        def copy(data: bytes) -> Iterable[bytes] | bytes:
            if len(tap) + len(data) <= TAPPED:
                tap.extend(data)
            return inner(data) if callable(inner) else data

        response.stream = copy

    def error(self, flow: http.HTTPFlow) -> None:
        self._taps.pop(flow.id, None)  # no answer whole, no ids to pair

    def response(self, flow: http.HTTPFlow) -> None:
        tap = self._taps.pop(flow.id, None)
        info = info_of(flow)
        if tap is None or info is None or flow.response is None:
            return
        headers = flow.response.headers.fields
        raw = bytes(tap) or (flow.response.raw_content or b"")
        live = answer_ids(decode_body(raw, headers, TAPPED).data, media_type(headers))
        if not live:
            return
        ids = self._state.response_ids(info.cassette)
        canonical = canonical_of(flow, info, self._key_config, self._redactor)
        view = ids.recorded_view(info.view) if info.view is not None else None
        key = canonical.key if view is None else canonicalize(view, self._key_config).key
        try:
            found = self._store.lookup(info.cassette, key, ids.next_live(key))
        except StoreError as exc:
            log.warning("%s: cannot read the recorded answer to map its ids: %s", info.target, exc)
            return
        body = response_body(found) if found is not None else None
        if found is None or found.recorded.response is None or body is None:
            return
        old = answer_ids(body.data, media_type(found.recorded.response.headers))
        for pair in ids.learn(pair_ids(old, live)):
            log.info(
                "%s %s: live %s stands for %s of %s#%d",
                flow.request.method,
                display_url(flow, info),
                pair.live,
                pair.recorded,
                info.cassette,
                found.seq,
            )
