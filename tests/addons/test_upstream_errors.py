"""addons.upstream_errors: an upstream that cannot be reached is answered with a JSON error."""

from __future__ import annotations

import json

from mitmproxy import flow as mflow
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.test import tflow

from freezeframe.addons.answers import TLS_VERIFY_FAILED
from freezeframe.addons.upstream_errors import UpstreamErrors

MESSAGE = f"{TLS_VERIFY_FAILED} unable to get local issuer certificate (errno: 20, depth: 0)"


def failed(host: str, message: str) -> mflow.Flow:
    flow = tflow.tflow()
    flow.request.data.host, flow.request.port = host, 8443
    flow.error = mflow.Error(message)
    return flow


def test_a_failed_verification_is_answered_naming_its_upstream_and_the_fix() -> None:
    addon = UpstreamErrors()
    addon.running()
    try:
        addon.error(failed("tools.internal", MESSAGE))
        page = _http1.make_error_response(502, MESSAGE)
        head, _, body = page.partition(b"\r\n\r\n")
        error = json.loads(body)["error"]
        assert head.startswith(b"HTTP/1.1 502") and error["type"] == "freezeframe_upstream_tls"
        assert "tools.internal:8443" in error["message"] and "--upstream-ca" in error["message"]
        # one page per failure: the next one, unnoted, is mitmproxy's own
        assert b"<html>" in _http1.make_error_response(502, MESSAGE)
    finally:
        addon.done()


def test_a_refused_connection_is_answered_naming_its_upstream_and_done_restores_the_page() -> None:
    original = _http1.make_error_response
    addon = UpstreamErrors()
    addon.running()
    try:
        addon.error(failed("api.example.com", "connection refused"))
        page = _http1.make_error_response(502, "connection refused")
        head, _, body = page.partition(b"\r\n\r\n")
        message = json.loads(body)["error"]["message"]
        assert head.startswith(b"HTTP/1.1 502") and b"<html>" not in page
        assert "api.example.com:8443" in message and "connection refused" in message
        # a failure no hook noted keeps mitmproxy's own page
        assert b"<html>" in _http1.make_error_response(502, "connection refused")
    finally:
        addon.done()
    assert _http1.make_error_response is original
