"""Who may change things through the admin port, and the headers every answer carries.

The admin port serves a web UI to a browser that also visits other sites, so a page on any
site could try to post to ``http://127.0.0.1:8081/`` (CSRF), or reach it under its own name
after re-pointing that name's DNS at the loopback address (DNS rebinding). A request with a
method that changes state (anything but GET, HEAD, OPTIONS and TRACE: fork, edit, sign in
and out, ``PUT /api/mode``, ``POST /api/replay/reset``) is therefore accepted only when

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

:class:`WriteGuard` holds these rules in front of the router, for every path and every route
to come, so no route checks them itself and none can forget to. No route sends CORS
headers, so no other origin can read an answer either. Every answer
carries a strict Content-Security-Policy (scripts and styles from the case file's own
``/static/`` only, no inline script, no framing), so recorded bytes shown on a page cannot
run even if a template forgot to escape them.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import parse_qsl

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
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

FORM = "application/x-www-form-urlencoded"
"""How the case file's forms post (no file uploads, so never multipart): the one body whose
``csrf_token`` field the guard reads."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
"""The methods that change nothing; every other one passes :class:`WriteGuard`'s rules."""
_FORM_TYPES = (FORM, "multipart/form-data", "text/plain")
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


def media_type(headers: Headers) -> str:
    """A ``Content-Type`` without its parameters: ``application/json; charset=utf-8`` is
    ``application/json``."""
    return headers.get("content-type", "").split(";")[0].strip().lower()


def check_write(request: Request, hosts: frozenset[str], form_token: str | None) -> None:
    """Raise WriteRefused unless ``request`` may change state (see the module's rules).

    ``form_token`` is the ``csrf_token`` field of a form post (:class:`WriteGuard` reads
    it); None for other posts."""
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
    if origin is None and fetch_site is None and media_type(headers) not in _FORM_TYPES:
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


Refusal = Callable[[Request, Mapping[str, str], str], Response]
"""How a path answers a write it refuses: given the request, its form's fields (empty when it
is not a form post) and the reason in one line."""


def refused(request: Request, fields: Mapping[str, str], reason: str) -> Response:
    """The answer to a refused write on any path but those given their own: JSON, 403."""
    return JSONResponse({"error": reason}, status_code=403)


class WriteGuard:
    """:func:`check_write` in front of the router: a request whose method may change state
    reaches no route unless the module's rules let it, on every path, including a route
    added later and one that does not exist (a cross-site post to it is 403, not 404).

    A form post carries its token in its body, so the guard reads a form's body first and
    then hands the route the same bytes (the route reads its fields again, tiny as a form
    is). It reads through the receive channel that ``limits.BodyLimit`` caps, so a body over
    its route's cap is answered 413 before any check, as it was when the routes read it. Any
    other body is not touched here: it streams to the route as it comes.

    ``refusals`` names the paths that answer a refusal their own way (the sign-in form
    shows it on the form); every other path answers :func:`refused`."""

    def __init__(
        self, app: ASGIApp, hosts: frozenset[str], refusals: Mapping[str, Refusal] | None = None
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.refusals = dict(refusals or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        fields: dict[str, str] = {}
        if media_type(request.headers) == FORM:
            body = await _whole_body(receive)
            if body is None:
                return  # the client left, or BodyLimit answered it: nobody to tell
            fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            receive = _replay(body, receive)
        try:
            check_write(request, self.hosts, fields.get(CSRF_FIELD) or None)
        except WriteRefused as exc:
            answer = self.refusals.get(scope["path"], refused)(request, fields, str(exc))
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _whole_body(receive: Receive) -> bytes | None:
    """A request's body, read to its end; None if the client disconnected first."""
    pieces: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        pieces.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(pieces)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that gives ``body`` again, whole, then whatever ``receive`` says
    next (a disconnect, which a streaming answer listens for)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
