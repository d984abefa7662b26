"""Reads and strips the ``X-Freezeframe-*`` request headers, and picks the cassette.

Runs first in the chain: the headers are the proxy's business, so no upstream may
see them and no request key may depend on them, and every later addon needs to know
which cassette a flow belongs to. This is also where secrets leave the request as far
as freezeframe's own records are concerned.
"""

from __future__ import annotations

import logging

from mitmproxy import http

from freezeframe.addons import answers
from freezeframe.addons._flows import METADATA_KEY, FlowInfo
from freezeframe.addons.routing import Routing
from freezeframe.addons.state import RuntimeState
from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.proxy")

PREFIX = "x-freezeframe-"
CASSETTE_HEADER = "x-freezeframe-cassette"
#: header -> the name the value is stored under (the replay kit's run context)
CONTEXT_HEADERS: dict[str, str] = {
    "x-freezeframe-run-id": "run-id",
    "x-freezeframe-session-id": "session-id",
    "x-freezeframe-user-id": "user-id",
    "x-freezeframe-tenant-id": "tenant-id",
    "x-freezeframe-commit": "commit",
    "x-freezeframe-flags": "flags",
}


class RequestContext:
    def __init__(self, state: RuntimeState, redactor: Redactor, routing: Routing) -> None:
        self._state = state
        self._redactor = redactor
        self._routing = routing

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """Runs before any body arrives: a streamed request's headers go upstream right after."""
        headers = flow.request.headers
        secrets = self._redactor.secret_values(headers.fields, flow.request.path)
        cassette = self._state.cassette
        context: dict[str, str] = {}
        ours = [name for name in headers if name.lower().startswith(PREFIX)]
        for name in ours:
            value = headers[name]
            del headers[name]
            lower = name.lower()
            if lower == CASSETTE_HEADER:
                cassette = value.strip()
            elif lower in CONTEXT_HEADERS:
                context[CONTEXT_HEADERS[lower]] = self._redactor.text(value)
        try:
            validate_cassette_name(cassette)
        except InvalidCassetteName as exc:
            log.warning("%s %s: %s", flow.request.method, flow.request.pretty_host, exc)
            flow.response = answers.error(400, "freezeframe_bad_cassette", f"freezeframe: {exc}")
            return
        target = self._redactor.target(flow.request.path)
        run = context.get("run-id", "")
        decision = self._routing.decide(
            self._state.mode,
            flow.request.host,
            flow.request.port,
            target.partition("?")[0],
            self._state.diverged(run),
        )
        if decision.upstream is not None:
            scheme, host, port = decision.upstream
            log.info(
                "%s %s: sent to %s://%s:%d (--model-url)",
                flow.request.method,
                flow.request.pretty_host,
                scheme,
                host,
                port,
            )
            flow.request.scheme, flow.request.host, flow.request.port = scheme, host, port
        flow.metadata[METADATA_KEY] = FlowInfo(
            cassette=cassette,
            context=context,
            target=target,
            request_headers=self._redactor.headers(flow.request.headers.fields),
            secrets=secrets,
            decision=decision,
        )
