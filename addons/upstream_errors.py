"""Answers an upstream that cannot be reached with an error an agent can act on.

mitmproxy answers a request it cannot forward with an HTML page, which an SDK surfaces as a
bare 502 (``openai.APIStatusError: Error code: 502 - <html>…``). The client is answered with
freezeframe's JSON error instead (``addons.answers.upstream_failure``), in the shape the
SDKs read, naming the upstream and the cause (a refused connection, a timeout, a certificate
that does not verify, with the ``--upstream-ca`` setting that fixes the last). The exchange
is still recorded as ``failed`` (``addons.record``), and replay answers it the same way.

mitmproxy writes that page after the ``error`` hook, from the message alone; the hook here
notes which upstream each failed verification was about, and the page takes the oldest note
with the same message.
"""

from __future__ import annotations

import time
from collections import deque

from mitmproxy import http
from mitmproxy.net.http.http1 import assemble_response

from freezeframe.addons import answers
from freezeframe.addons.mitmproxy_internals import set_error_page

STALE_S = 30.0
"""A note older than this is dropped: its page was never written (the client had gone)."""


class UpstreamErrors:
    def __init__(self) -> None:
        self._pending: dict[str, deque[tuple[float, str]]] = {}

    def running(self) -> None:
        set_error_page(self._page)

    def done(self) -> None:
        set_error_page(None)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is None:
            return
        address = f"{flow.request.host}:{flow.request.port}"
        self._pending.setdefault(flow.error.msg, deque()).append((time.monotonic(), address))

    def _page(self, status: int, message: str) -> bytes | None:
        notes = self._pending.get(message)
        now = time.monotonic()
        while notes and now - notes[0][0] > STALE_S:
            notes.popleft()
        if not notes:
            self._pending.pop(message, None)
            return None
        _, address = notes.popleft()
        return bytes(assemble_response(answers.upstream_failure(status, message, address)))
