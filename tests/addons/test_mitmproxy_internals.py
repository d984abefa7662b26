"""The private mitmproxy API freezeframe leans on is still where it was.

If a mitmproxy upgrade moves any of it, these fail with the name of what moved, instead of
freezeframe quietly sending mitmproxy's HTML error page or losing HTTP/2 with its clients.
"""

from __future__ import annotations

import inspect

from mitmproxy.proxy.layers.http import _http1

from freezeframe.addons import mitmproxy_internals


def test_http1_error_pages_still_come_from_make_error_response() -> None:
    source = inspect.getsource(_http1.Http1Server.send)
    assert "make_error_response(" in source, "Http1Server no longer renders errors there"
    assert list(inspect.signature(_http1.make_error_response).parameters) == [
        "status_code",
        "message",
    ]


def test_an_error_page_can_be_replaced_and_restored() -> None:
    original = _http1.make_error_response
    mitmproxy_internals.set_error_page(lambda status, message: b"ours" if status == 502 else None)
    try:
        assert _http1.make_error_response(502, "boom") == b"ours"
        assert _http1.make_error_response(400, "bad").startswith(b"HTTP/1.1 400")
    finally:
        mitmproxy_internals.set_error_page(None)
    assert _http1.make_error_response is original


def test_the_client_alpn_choice_is_still_app_data_of_the_connection() -> None:
    from mitmproxy.addons import tlsconfig

    source = inspect.getsource(tlsconfig)
    assert '"client_alpn"' in source, "mitmproxy no longer reads client_alpn from app data"
    assert mitmproxy_internals.format_error(502, "<x>").count(b"&lt;x&gt;") == 1


def test_client_certificates_can_be_made_valid_at_another_time() -> None:
    from datetime import UTC, datetime

    from mitmproxy import certs

    source = inspect.getsource(certs.dummy_cert)
    assert "CERT_VALIDITY_OFFSET" in source, "mitmproxy no longer reads the validity offset"
    original = certs.CERT_VALIDITY_OFFSET
    mitmproxy_internals.certificates_valid_from(datetime(2024, 2, 29, tzinfo=UTC))
    try:
        assert datetime.now() + certs.CERT_VALIDITY_OFFSET < datetime(2024, 2, 28)
    finally:
        mitmproxy_internals.certificates_valid_from(None)
    assert certs.CERT_VALIDITY_OFFSET == original


def test_tls_writes_still_pass_the_tunnel_layers_event_to_child_and_can_be_joined() -> None:
    from mitmproxy.proxy import tunnel
    from mitmproxy.proxy.layers import tls

    source = inspect.getsource(tunnel.TunnelLayer.event_to_child)
    assert "self._event_queue.append(event)" in source, "the tunnel no longer queues events"
    assert "self.child_layer.handle_event(event)" in source, "the child's commands moved"
    assert "yield from self._handle_command(command)" in source, "SendData no longer goes there"
    assert "def send_data" in inspect.getsource(tls.TLSLayer), "TLS no longer encrypts there"
    mitmproxy_internals.coalesce_tls_writes(True)
    try:
        assert tls.TLSLayer.event_to_child is not tunnel.TunnelLayer.event_to_child
    finally:
        mitmproxy_internals.coalesce_tls_writes(False)
    assert tls.TLSLayer.event_to_child is tunnel.TunnelLayer.event_to_child
