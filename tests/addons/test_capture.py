"""A captured flow is named as an HTTPS_PROXY client's CONNECT would name it."""

from __future__ import annotations

import pytest
from mitmproxy import http
from mitmproxy.proxy import layer, mode_specs, server_hooks
from mitmproxy.proxy.context import Context
from mitmproxy.test import taddons, tflow

from freezeframe.addons.capture import AddressBook, Capture
from freezeframe.addons.state import Mode, RuntimeState


@pytest.fixture
def book() -> AddressBook:
    return AddressBook()


def capture(book: AddressBook, mode: Mode = Mode.RECORD) -> Capture:
    return Capture(RuntimeState(mode, "default", 1.0, False), book)


def captured_flow(
    host: str, *, sni: str | None = None, host_header: str | None = None
) -> http.HTTPFlow:
    flow = tflow.tflow()
    flow.client_conn.proxy_mode = mode_specs.ProxyMode.parse("tun")
    flow.client_conn.sni = sni
    flow.request.data.host = host
    flow.request.port = 443
    if host_header is None:
        flow.request.headers.pop("host", None)
    else:
        flow.request.headers["host"] = host_header
    return flow


def test_the_book_gives_each_name_one_address_for_good(book: AddressBook) -> None:
    first = book.address_of("API.openai.com.")
    assert book.address_of("api.openai.com") == first
    assert book.address_of("api.anthropic.com") != first
    assert book.name_of(str(first)) == "api.openai.com"
    assert book.is_pooled(str(first)) and not book.is_pooled("127.0.0.1")
    assert book.name_of("198.18.9.9") is None and book.name_of("not an address") is None
    assert book.describe(str(first), 443) == "api.openai.com:443"
    assert book.describe("::1", 5432) == "[::1]:5432"


def test_a_captured_request_is_named_by_the_book_then_sni_then_host_header(
    book: AddressBook,
) -> None:
    addon = capture(book)
    address = str(book.address_of("api.openai.com"))
    cases = [
        (captured_flow(address, sni="other.example"), "api.openai.com"),
        (captured_flow("203.0.113.7", sni="Tools.Example."), "tools.example"),
        (captured_flow("203.0.113.7", host_header="mcp.internal:8080"), "mcp.internal"),
        (captured_flow("203.0.113.7", host_header="203.0.113.7:8080"), "203.0.113.7"),
    ]
    for flow, name in cases:
        addon.requestheaders(flow)
        assert (flow.request.host, flow.request.port) == (name, 443)


def test_a_proxied_request_keeps_its_connect_host(book: AddressBook) -> None:
    flow = tflow.tflow()
    host = flow.request.host
    capture(book).requestheaders(flow)
    assert flow.request.host == host


def test_a_book_address_is_dialled_by_name_and_an_unknown_one_not_at_all(
    book: AddressBook,
) -> None:
    addon = capture(book)
    flow = tflow.tflow()
    known = server_hooks.ServerConnectionHookData(client=flow.client_conn, server=flow.server_conn)
    known.server.address = (str(book.address_of("db.internal")), 5432)
    addon.server_connect(known)
    assert known.server.address == ("db.internal", 5432) and known.server.error is None

    other = tflow.tflow()
    unknown = server_hooks.ServerConnectionHookData(
        client=other.client_conn, server=other.server_conn
    )
    unknown.server.address = ("198.18.200.1", 443)
    addon.server_connect(unknown)
    assert unknown.server.error


@pytest.mark.parametrize(("mode", "refused"), [(Mode.REPLAY, True), (Mode.RECORD, False)])
def test_replay_opens_no_raw_tcp_connection(book: AddressBook, mode: Mode, refused: bool) -> None:
    flow = tflow.ttcpflow()
    flow.server_conn.error = None
    capture(book, mode).tcp_start(flow)
    assert bool(flow.server_conn.error) is refused


def test_captured_udp_is_refused_as_plain_udp_and_proxied_udp_is_left_alone(
    book: AddressBook,
) -> None:
    addon = capture(book)
    with taddons.context() as tctx:
        decisions = []
        for mode in ("tun", "regular"):
            client = tflow.tclient_conn()
            client.transport_protocol = "udp"
            client.proxy_mode = mode_specs.ProxyMode.parse(mode)
            nextlayer = layer.NextLayer(Context(client, tctx.options))
            addon.next_layer(nextlayer)
            decisions.append(type(nextlayer.layer).__name__)
        flow = tflow.tudpflow()
        flow.server_conn.address = ("1.1.1.1", 443)
        addon.udp_start(flow)
    assert decisions == ["UDPLayer", "NoneType"]
    assert flow.server_conn.error == "freezeframe refuses captured UDP to 1.1.1.1:443"
