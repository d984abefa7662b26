"""addons.alpn: a client that offers HTTP/2 is given it, as a real server would."""

from __future__ import annotations

from typing import Any

import pytest
from mitmproxy import connection, tls
from mitmproxy.options import Options
from mitmproxy.proxy.context import Context
from mitmproxy.test import taddons
from OpenSSL import SSL

from freezeframe.addons.alpn import PreferHttp2


def start(
    options: Options, offers: list[bytes], server_alpn: bytes | None
) -> tuple[tls.TlsData, Any]:
    client = connection.Client(
        peername=("127.0.0.1", 50000), sockname=("127.0.0.1", 8080), timestamp_start=0
    )
    client.alpn_offers = offers
    context = Context(client, options)
    context.server.alpn = server_alpn
    ssl_conn = SSL.Connection(SSL.Context(SSL.TLS_METHOD))
    app_data: dict[str, Any] = {"client_alpn": None}
    ssl_conn.set_app_data(app_data)
    return tls.TlsData(client, context, ssl_conn), app_data


@pytest.mark.parametrize(
    ("offers", "server_alpn", "http2", "chosen"),
    [
        ([b"http/1.1", b"h2"], None, True, b"h2"),
        ([b"http/1.1"], None, True, None),
        ([b"http/1.1", b"h2"], b"http/1.1", True, None),  # the upstream already decided
        ([b"http/1.1", b"h2"], None, False, None),  # --no-http2
    ],
)
def test_h2_is_chosen_when_offered_and_nothing_else_decided(
    offers: list[bytes], server_alpn: bytes | None, http2: bool, chosen: bytes | None
) -> None:
    addon = PreferHttp2()
    with taddons.context(addon) as tctx:
        tctx.options.http2 = http2
        data, app_data = start(tctx.options, offers, server_alpn)
        addon.tls_start_client(data)
    assert app_data["client_alpn"] == chosen
