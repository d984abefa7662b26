"""Gives HTTP/2 to clients that offer it, as a server would.

With ``connection_strategy=lazy`` (which replay needs: no upstream connection before a
request), mitmproxy negotiates ALPN with the client before it has talked to the upstream,
and then takes the client's first preference. Python clients (httpx, and the SDKs built on
it) list ``http/1.1`` first, so HTTP/2 would never be used between client and proxy even
when both sides speak it. Real servers pick ``h2`` whenever it is offered; so does this.
mitmproxy translates between the versions if the upstream turns out to speak only HTTP/1.1.
"""

from __future__ import annotations

from mitmproxy import ctx, tls

from freezeframe.addons.mitmproxy_internals import prefer_alpn


class PreferHttp2:
    def tls_start_client(self, tls_start: tls.TlsData) -> None:
        context = tls_start.context
        if (
            tls_start.ssl_conn is None
            or not ctx.options.http2
            or context.server.alpn
            or b"h2" not in context.client.alpn_offers
        ):
            return
        prefer_alpn(tls_start.ssl_conn, b"h2")
