"""A mitmproxy ``Master`` with only the addons a recorder needs.

mitmdump loads some thirty addons and every one of them is dispatched on every event
of every flow. freezeframe keeps mitmproxy's proxy core (server, protocol detection,
TLS) and adds its own chain, which is most of why recording costs less than
``mitmdump -w``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mitmproxy import options

from freezeframe.addons import AddressBook, Routing, default_addons
from freezeframe.addons.mitmproxy_internals import bound_request_heads, coalesce_tls_writes
from freezeframe.addons.proxycredentials import DropProxyCredentials
from freezeframe.addons.state import RuntimeState
from freezeframe.proxy.keys import key_config
from freezeframe.proxy.mitmcore import Master, next_layer, proxyserver, tlsconfig, upstream_auth
from freezeframe.proxy.settings import Settings
from freezeframe.storage import Store
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.perturb import Perturber

REQUEST_HEAD_BYTES = 256 * 1024
"""The longest HTTP/1 request head the proxy port reads (the request line and headers):
SDK requests carry a few kilobytes; browsers and servers stop at 8 to 64 KiB."""


def mitmproxy_options(
    settings: Settings, upstream_trust: str, extra_modes: Sequence[str] = ()
) -> dict[str, object]:
    """``extra_modes``: capture modes ``exec`` adds (``tun:NAME``, ``local:PID``)."""
    host = settings.listen.host
    forward = f"upstream:{settings.upstream_proxy.url}" if settings.upstream_proxy else "regular"
    modes = [f"{forward}@{host}:{settings.listen.port}"]
    modes += [f"reverse:{target.url}@{host}:{target.port}" for target in settings.reverse]
    modes += extra_modes
    return {
        "listen_host": host,
        "listen_port": settings.listen.port,
        "mode": modes,
        "upstream_auth": settings.upstream_proxy.auth if settings.upstream_proxy else None,
        "confdir": str(settings.data_dir.absolute()),
        # Never open an upstream connection before a request needs one: replay must be
        # able to answer without any upstream, including for the CONNECT and the TLS
        # handshake with the client (certificates are made from the SNI instead).
        "connection_strategy": "lazy",
        "upstream_cert": False,
        "ssl_verify_upstream_trusted_ca": upstream_trust,
    }


def build_master(
    settings: Settings,
    store: Store,
    state: RuntimeState,
    redactor: Redactor,
    upstream_trust: str,
    addresses: AddressBook,
    extra_modes: Sequence[str] = (),
    perturber: Perturber | None = None,
) -> Master:
    """Must be called with the event loop running: mitmproxy binds to it."""
    bound_request_heads(REQUEST_HEAD_BYTES)
    coalesce_tls_writes(True)
    config = key_config(settings.rules)
    wanted = mitmproxy_options(settings, upstream_trust, extra_modes)
    # The confdir before the addons: set by the update below, it would make TlsConfig load
    # the CA (checking its RSA key) there, and TlsConfig loads it anyway once running.
    opts = options.Options(confdir=wanted.pop("confdir"))
    proxy_master = Master(opts)
    proxy_master.addons.add(
        proxyserver.Proxyserver(),
        next_layer.NextLayer(),
        tlsconfig.TlsConfig(),
        DropProxyCredentials(),  # before UpstreamAuth, which sets the upstream proxy's own
        upstream_auth.UpstreamAuth(),
        *default_addons(
            store,
            state,
            redactor,
            config,
            addresses=addresses,
            routing=Routing(
                live=settings.live,
                routes=config.rules.routes,
                record_into=settings.record_into,
                after_miss_live=settings.after_miss == "live",
                live_upstream=settings.live_upstream,
            ),
            admin=str(settings.admin),
            strict=settings.durability == "strict",
            perturber=perturber,
        ),
    )
    opts.update(**wanted)
    return proxy_master
