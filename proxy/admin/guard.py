"""Who may change things through the admin port, and the headers every answer carries.

The admin port serves a web UI to a browser that also visits other sites, so a page on any
site could try to post to ``http://127.0.0.1:8081/`` (CSRF), or reach it under its own name
after re-pointing that name's DNS at the loopback address (DNS rebinding). A request that
changes state (fork, edit, ``PUT /api/mode``, ``POST /api/replay/reset``) is therefore
accepted only when

1. its ``Host`` names the admin port: its address, a loopback name, or a name allowed with
   ``--admin-host`` (``access`` refuses any other ``Host`` for every route already; this
   keeps the rule where the writes are);
2. a browser sent it from the case file itself: an ``Origin`` header, when there is one,
   names the same host, ``Sec-Fetch-Site`` (when sent) is ``same-origin`` or ``none``;
3. and it carries the case file's CSRF token (double submit: the ``freezeframe_csrf``
   cookie, SameSite=Strict, equal to the ``csrf_token`` form field or the
   ``X-CSRF-Token`` header), *or* it is plainly not from a browser: no ``Origin``, no
   ``Sec-Fetch-Site``, and no content type a cross-site HTML form can send (so curl and
   ``freezeframe replay-reset`` pass, and so does a JSON post from a script).

No route sends CORS headers, so no other origin can read an answer either. Every answer
carries a strict Content-Security-Policy (scripts and styles from the case file's own
``/static/`` only, no inline script, no framing), so recorded bytes shown on a page cannot
run even if a template forgot to escape them.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from freezeframe.proxy.settings import Address

CSRF_COOKIE = "freezeframe_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
"""No inline script or style, nothing from elsewhere; htmx is served from /static/."""

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
"""The content types a cross-site HTML form can post without asking first."""
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


class WriteRefused(Exception):
    """A state-changing request that did not come from the case file; says why in one line."""


def allowed_hosts(admin: Address, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a request's ``Host`` may carry (port aside): the loopback names, the bound
    address unless it is every interface (``0.0.0.0``, ``::``), and the ``extra`` names.

    The port is not compared: a docker port mapping or a load balancer may put another one
    in front, and rebinding is about the name; ``Origin`` is compared with port and all."""
    host = admin.host.strip("[]").lower()
    names = {*_LOOPBACK_NAMES, *(name.lower() for name in extra)}
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return frozenset({*names, host})
    if not address.is_unspecified:
        names.add(f"[{host}]" if address.version == 6 else host)
    return frozenset(names)


def host_name(host: str) -> str:
    """A ``Host`` header's name without its port: ``[::1]:8081`` is ``[::1]``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0].rstrip(".")


def check_write(request: Request, hosts: frozenset[str], form_token: str | None) -> None:
    """Raise WriteRefused unless ``request`` may change state (see the module's rules).

    ``form_token`` is the ``csrf_token`` field of a form post, read by the caller (who
    reads the form anyway); None for other posts."""
    headers = request.headers
    host = headers.get("host", "").lower()
    if host_name(host) not in hosts:
        raise WriteRefused(f"Host {host!r} is not a name of the admin port; refused")
    origin = headers.get("origin")
    if origin is not None and origin.lower() != f"{request.url.scheme}://{host}":
        raise WriteRefused(f"a request from {origin!r} may not change the case file; refused")
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise WriteRefused(f"a {fetch_site} request may not change the case file; refused")
    cookie = request.cookies.get(CSRF_COOKIE)
    offered = form_token or headers.get(CSRF_HEADER)
    if cookie and offered and hmac.compare_digest(cookie.encode(), offered.encode()):
        return
    if offered is not None:
        raise WriteRefused("the CSRF token does not match this browser's; reload the page")
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if origin is None and fetch_site is None and content_type not in _FORM_TYPES:
        return
    raise WriteRefused("a browser's request needs the case file's CSRF token; refused")


def csrf_token(request: Request) -> str:
    """This browser's CSRF token: its cookie's value, or a new one that the answer sets
    (SecurityHeaders writes the cookie when ``request.state.new_csrf`` is there)."""
    token = request.cookies.get(CSRF_COOKIE)
    if token:
        return token
    if not hasattr(request.state, "new_csrf"):
        request.state.new_csrf = secrets.token_urlsafe(32)
    token = request.state.new_csrf
    assert isinstance(token, str)
    return token


class SecurityHeaders:
    """Adds the CSP and friends to every answer, and the CSRF cookie a page minted."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["content-security-policy"] = CONTENT_SECURITY_POLICY
                headers["x-content-type-options"] = "nosniff"
                headers["x-frame-options"] = "DENY"
                # Not no-referrer: then a browser sends the case file's own form posts with
                # ``Origin: null``, which the same-origin check must refuse.
                headers["referrer-policy"] = "same-origin"
                headers["cross-origin-resource-policy"] = "same-origin"
                minted = scope["state"].get("new_csrf")
                if minted and CSRF_COOKIE not in Headers(scope=scope).get("cookie", ""):
                    headers.append(
                        "set-cookie",
                        f"{CSRF_COOKIE}={minted}; Path=/; HttpOnly; SameSite=Strict",
                    )
            await send(message)

        await self.app(scope, receive, with_headers)
