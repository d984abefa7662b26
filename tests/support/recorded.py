"""The official SDKs talking to a real server, each exchange kept as the store would give it
back, without a proxy in between.

    sdk = RecordingSdk(upstream)                  # or RecordingSdk() with only prepared answers
    sdk.openai.chat.completions.create(...)       # the SDK parses the real answer
    sdk.prepare(body, content_type=...)           # the next request gets this answer instead
    sdk.send("GET", "/tool/counter?q=x")          # any other request, recorded the same way
    sdk.exchanges                                 # storage.Exchange, seq 0, 1, 2, ...

Answers are kept as they came on the wire: content-encoding and all, read with ``iter_raw``.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx2

from freezeframe.storage import Exchange
from support.exchanges import stored_exchange
from support.sdk_capture import SdkCapture
from support.upstream import Upstream, client_ssl_context

__all__ = ["RecordingSdk"]


class RecordingSdk(SdkCapture):
    """SDK clients whose requests go to ``upstream`` (or get a prepared answer), every
    exchange recorded in ``exchanges``."""

    def __init__(self, upstream: Upstream | None = None) -> None:
        super().__init__()
        self.upstream = upstream
        self.exchanges: list[Exchange] = []
        self._prepared: list[tuple[int, list[tuple[str, str]], bytes]] = []
        self._context: ssl.SSLContext | None = None
        if upstream is not None:
            self._context = client_ssl_context(upstream.ca)

    def prepare(
        self,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Answer the next request with this instead of asking the upstream."""
        self._prepared.append((status, [("content-type", content_type), *headers], body))

    def send(self, method: str, target: str, **kwargs: Any) -> httpx2.Response:
        """Any request (``target`` a path on the upstream), recorded like the SDKs'."""
        assert self.upstream is not None
        request = httpx2.Request(method, self.upstream.url(target), **kwargs)
        return self.respond(request)

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        if self._prepared:
            status, headers, body = self._prepared.pop(0)
        else:
            assert self.upstream is not None, "no upstream and no prepared answer"
            url = self.upstream.url(request.url.raw_path.decode("ascii"))
            with (
                httpx2.Client(verify=self._context, trust_env=False, timeout=10) as client,
                client.stream(
                    request.method, url, headers=request.headers, content=request.content
                ) as answer,
            ):
                body = b"".join(answer.iter_raw())
            status, headers = answer.status_code, list(answer.headers.multi_items())
        self.exchanges.append(
            stored_exchange(
                seq=len(self.exchanges),
                method=request.method,
                url=url,
                request_headers=tuple(
                    (k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()
                ),
                request_body=request.content,
                status=status,
                response_headers=tuple(
                    (k.encode("latin-1"), v.encode("latin-1")) for k, v in headers
                ),
                response_body=body,
            )
        )
        return httpx2.Response(status, headers=headers, content=body)
