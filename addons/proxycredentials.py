"""The client's proxy credential stays with the proxy.

A client configured with ``HTTP_PROXY=http://user:pass@…`` sends ``Proxy-Authorization`` on
every plain-HTTP request (over HTTPS it goes only on the ``CONNECT``). The header is the
proxy's credential, consumed by the first proxy it reaches (RFC 9110, 11.7.2), yet mitmproxy
forwards a plain-HTTP request's headers as they came, so the origin server would receive it.
This addon drops it before anything else sees the request; it runs ahead of mitmproxy's
``UpstreamAuth``, which then sets the upstream proxy's own credential where one is configured.
"""

from __future__ import annotations

from mitmproxy import http


class DropProxyCredentials:
    """Removes ``Proxy-Authorization`` from every request before it goes anywhere."""

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if "proxy-authorization" in flow.request.headers:
            del flow.request.headers["proxy-authorization"]
