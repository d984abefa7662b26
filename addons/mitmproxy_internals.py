"""Every use of mitmproxy's private API, in one place.

mitmproxy gives addons no say over three things freezeframe needs: the error page it sends
when a request cannot be forwarded, which ALPN protocol the client side gets under the lazy
connection strategy, and from when the certificates it makes for clients are valid. Each is
reached here and nowhere else, so a mitmproxy upgrade that moves one breaks this module, and
``tests/addons/test_mitmproxy_internals.py`` says so by name, instead of the behaviour
changing quietly in the middle of the proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from mitmproxy import certs
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._base import format_error
from OpenSSL import SSL

__all__ = [
    "ErrorPage",
    "certificates_valid_from",
    "format_error",
    "prefer_alpn",
    "set_error_page",
]

ErrorPage = Callable[[int, str], bytes | None]
"""``(status, message) -> raw HTTP/1 response``, or None for mitmproxy's own page."""

_MITMPROXY_ERROR_PAGE = _http1.make_error_response
_MITMPROXY_VALIDITY_OFFSET = certs.CERT_VALIDITY_OFFSET


def set_error_page(render: ErrorPage | None) -> None:
    """Let ``render`` write the error response mitmproxy sends an HTTP/1 client when it
    cannot forward a request (mitmproxy's ``make_error_response``); None restores
    mitmproxy's. HTTP/2 clients keep mitmproxy's page: its HTTP/2 layer writes the
    headers itself."""
    if render is None:
        _http1.make_error_response = _MITMPROXY_ERROR_PAGE
        return

    def make_error_response(status_code: int, message: str = "") -> bytes:
        return render(status_code, message) or _MITMPROXY_ERROR_PAGE(status_code, message)

    _http1.make_error_response = make_error_response


def prefer_alpn(ssl_conn: SSL.Connection, protocol: bytes) -> None:
    """Make the client side of ``ssl_conn`` select ``protocol`` if the client offers it,
    unless an upstream already decided (mitmproxy's ``client_alpn`` app data)."""
    app_data = ssl_conn.get_app_data()
    if isinstance(app_data, dict) and app_data.get("client_alpn") is None:
        app_data["client_alpn"] = protocol


def certificates_valid_from(moment: datetime | None) -> None:
    """Make the certificates mitmproxy makes for clients from now on valid from its margin
    (two days) before ``moment`` instead of before now, for a client whose clock is set to
    ``moment`` (``exec --clock``), which would refuse one not yet valid; None restores
    mitmproxy's. mitmproxy reads ``CERT_VALIDITY_OFFSET`` each time it makes one."""
    if moment is None:
        certs.CERT_VALIDITY_OFFSET = _MITMPROXY_VALIDITY_OFFSET
        return
    shift = moment - datetime.now(moment.tzinfo)
    certs.CERT_VALIDITY_OFFSET = shift + _MITMPROXY_VALIDITY_OFFSET
