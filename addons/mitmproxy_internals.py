"""Every use of mitmproxy's private API, in one place.

mitmproxy gives addons no say over five things freezeframe needs: the error page it sends
when a request cannot be forwarded, which ALPN protocol the client side gets under the lazy
connection strategy, from when the certificates it makes for clients are valid, how much
of an HTTP/1 request head it buffers before the head ends, and how the bytes it writes at
once are cut into TLS records. Each is
reached here and nowhere else, so a mitmproxy upgrade that moves one breaks this module, and
``tests/addons/test_mitmproxy_internals.py`` says so by name, instead of the behaviour
changing quietly in the middle of the proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from mitmproxy import certs
from mitmproxy.proxy import commands, events, layer, tunnel
from mitmproxy.proxy.layers import tls
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._base import format_error
from OpenSSL import SSL

__all__ = [
    "ErrorPage",
    "bound_request_heads",
    "certificates_valid_from",
    "coalesce_tls_writes",
    "format_error",
    "prefer_alpn",
    "set_error_page",
]

ErrorPage = Callable[[int, str], bytes | None]
"""``(status, message) -> raw HTTP/1 response``, or None for mitmproxy's own page."""

_MITMPROXY_ERROR_PAGE = _http1.make_error_response
_MITMPROXY_READ_HEADERS = _http1.Http1Server.read_headers
_MITMPROXY_VALIDITY_OFFSET = certs.CERT_VALIDITY_OFFSET
_MITMPROXY_TLS_EVENT_TO_CHILD = tls.TLSLayer.event_to_child


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


def bound_request_heads(limit: int | None) -> None:
    """Answer 431 and close a client connection whose HTTP/1 request head has not ended
    within ``limit`` bytes; None restores mitmproxy's, which buffers a head without end
    (its ``Http1Server.read_headers`` says "FIXME: protect against header size DoS": an
    unterminated head held 394 MB). Bytes past a head that has ended are its body's, and
    are not counted."""
    if limit is None:
        _http1.Http1Server.read_headers = _MITMPROXY_READ_HEADERS  # type: ignore[method-assign]
        return

    def read_headers(
        self: _http1.Http1Server, event: events.ConnectionEvent
    ) -> layer.CommandGenerator[None]:
        yield from _MITMPROXY_READ_HEADERS(self, event)
        if (
            isinstance(event, events.DataReceived)
            and self.state == self.read_headers
            and len(self.buf) > limit
        ):
            yield commands.Log(f"a request head passed {limit} bytes without ending: closed")
            page = _http1.make_error_response(431, f"request head over {limit} bytes")
            yield commands.SendData(self.conn, page)
            yield commands.CloseConnection(self.conn)
            self.buf = type(self.buf)()  # the bytes held so far go now, not at the close
            self.state = self.done

    _http1.Http1Server.read_headers = read_headers  # type: ignore[method-assign]


def coalesce_tls_writes(on: bool) -> None:
    """Send the bytes the layers under a TLS connection write for one event as one
    ``sendall``, so as few TLS records as they fit in; False restores mitmproxy's, which
    encrypts each write on its own: a response's head, then its body, in records of their own.

    A server that writes a small answer at once has it read by the client in one piece;
    split into records, Node's ``fetch`` (undici) acts on the head before the body has
    come, and when the head says 421 it retries on a new connection while aborting the
    first, which ends the retry's request body before its first byte: the retry goes out
    with ``content-length: 0`` and fails with ``RequestContentLengthMismatchError``.
    Writes are only joined while nothing but log lines comes in between, so none waits
    for anything: whatever another command (a hook, a close) would see has been sent first.
    """
    if not on:
        tls.TLSLayer.event_to_child = _MITMPROXY_TLS_EVENT_TO_CHILD  # type: ignore[method-assign]
        return

    def event_to_child(
        self: tunnel.TunnelLayer, event: events.Event
    ) -> layer.CommandGenerator[None]:
        # mitmproxy's TunnelLayer.event_to_child, with the child's writes to this
        # connection held until its next other command, or its end.
        if self.tunnel_state is tunnel.TunnelState.ESTABLISHING and not self.command_to_reply_to:
            self._event_queue.append(event)
            return
        held: list[commands.SendData] = []
        for command in self.child_layer.handle_event(event):
            if isinstance(command, commands.SendData) and command.connection == self.conn:
                held.append(command)
            elif isinstance(command, commands.Log):  # a log line is no peer's business
                yield from self._handle_command(command)
            else:
                yield from _send_held(self, held)
                yield from self._handle_command(command)
        yield from _send_held(self, held)

    tls.TLSLayer.event_to_child = event_to_child  # type: ignore[method-assign]


def _send_held(
    tls_layer: tunnel.TunnelLayer, held: list[commands.SendData]
) -> layer.CommandGenerator[None]:
    """The held writes to the layer's connection as one, and none held after."""
    if len(held) > 1:
        held[:] = [commands.SendData(tls_layer.conn, b"".join(c.data for c in held))]
    for command in held:
        yield from tls_layer._handle_command(command)
    held.clear()
