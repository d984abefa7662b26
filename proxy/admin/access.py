"""Who may reach the admin port at all: the names it answers to, and its admin token.

``guard`` decides whether a request may *change* something; this decides, before any route
runs, whether a request is answered at all. Two checks:

1. **DNS rebinding.** A page on ``attacker.example`` can re-point that name at 127.0.0.1 (or
   at a docker host) and then read the admin port as its own origin, past the browser's
   same-origin rule; only the ``Host`` header still says which name the browser meant. So
   every request must name the admin port: its bound address, a loopback name
   (``localhost``, ``127.0.0.1``, ``[::1]``), or a name allowed with ``--admin-host``
   (``FREEZEFRAME_ADMIN_HOSTS``). Anything else is answered 421 in one line. ``/health``
   and ``/ca.pem`` are exempt, since probes and load balancers reach them by whatever
   address they have; ``/health`` then tells only whether the proxy is up.
2. **The admin token** (``--admin-token``, required when the port is not on loopback).
   With one set, every route but ``/health``, ``/ca.pem``, the login page and the static
   files it needs asks for it: a script sends ``Authorization: Bearer TOKEN`` (compared in
   constant time), a browser signs in once at ``/login`` and gets a session cookie
   (``HttpOnly``, ``SameSite=Strict``) holding a random id that this process keeps in
   memory, never the token. A restart signs every browser out. Wrong tokens, posted to the
   form or sent as a bearer header, count together per client address (``LoginAttempts``):
   past ten a minute that address gets 429 for either, the right token included, so the
   answer tells a guesser nothing. The address is the connection's own; ``X-Forwarded-For``
   is believed only from a proxy named with ``--admin-trusted-proxy`` (admin.server).

Without a token a loopback port stays open to every local program, as before: what keeps
other sites out is the ``Host`` check here and ``guard``'s same-origin and CSRF rules.
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections import deque
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from freezeframe.proxy.admin.context import AdminContext
from freezeframe.proxy.admin.guard import csrf_token, host_name

SESSION_COOKIE = "freezeframe_session"
SESSION_SECONDS = 12 * 3600
"""How long a browser stays signed in without signing in again."""
MAX_SESSIONS = 1000
"""Signed-in browsers kept at once; signing in past this signs the oldest out."""
PUBLIC = frozenset({"/health", "/ca.pem"})
"""Routes anyone who reaches the port may read, whatever their Host or token."""
LOGIN = "/login"
LOGOUT = "/logout"
LOGIN_FAILURES = 10
"""Wrong tokens one client address may offer within LOGIN_WINDOW, posted to /login or sent as
a bearer header, before it gets 429."""
LOGIN_WINDOW = 60.0
MAX_CLIENTS = 10_000
"""Client addresses whose failures are remembered at once; past this the oldest is forgotten."""


class Sessions:
    """The browsers signed in to the case file: a random id each, good for a while."""

    def __init__(self, lifetime: float = SESSION_SECONDS, limit: int = MAX_SESSIONS) -> None:
        self._lifetime = lifetime
        self._limit = limit
        self._expiry: dict[str, float] = {}

    def open(self) -> str:
        now = time.monotonic()
        self._expiry = {sid: end for sid, end in self._expiry.items() if end > now}
        while len(self._expiry) >= self._limit:
            del self._expiry[next(iter(self._expiry))]
        sid = secrets.token_urlsafe(32)
        self._expiry[sid] = now + self._lifetime
        return sid

    def valid(self, sid: str | None) -> bool:
        return sid is not None and self._expiry.get(sid, 0.0) > time.monotonic()

    def close(self, sid: str | None) -> None:
        if sid is not None:
            self._expiry.pop(sid, None)


class LoginAttempts:
    """Wrong tokens posted to /login, per client address, over the last LOGIN_WINDOW seconds.

    A token typed into a form can be guessed at whatever speed the port answers; past
    LOGIN_FAILURES in a window the form answers 429 until the oldest failure ages out, so a
    guesser gets ten tries a minute. Kept in memory, bounded by MAX_CLIENTS addresses.
    """

    def __init__(
        self,
        limit: int = LOGIN_FAILURES,
        window: float = LOGIN_WINDOW,
        clients: int = MAX_CLIENTS,
    ) -> None:
        self._limit = limit
        self._window = window
        self._clients = clients
        self._failed: dict[str, deque[float]] = {}

    def wait(self, client: str) -> int:
        """Seconds before ``client`` may try again; 0 if it may now."""
        failures = self._failed.get(client)
        if failures is None:
            return 0
        now = time.monotonic()
        while failures and failures[0] <= now - self._window:
            failures.popleft()
        if not failures:
            del self._failed[client]
            return 0
        if len(failures) < self._limit:
            return 0
        return max(1, math.ceil(failures[0] + self._window - now))

    def failed(self, client: str) -> None:
        failures = self._failed.pop(client, None) or deque()
        failures.append(time.monotonic())
        self._failed[client] = failures  # last in the dict: the most recently failed
        while len(self._failed) > self._clients:
            del self._failed[next(iter(self._failed))]

    def succeeded(self, client: str) -> None:
        self._failed.pop(client, None)


def bearer_matches(request: Request, token: str) -> bool:
    """Whether the request's ``Authorization: Bearer`` value is the token."""
    scheme, _, offered = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(offered.strip().encode(), token.encode())


def _wants_page(request: Request) -> bool:
    """A browser navigating to a page, who is better sent to the login form than a 401."""
    path = request.url.path
    return (
        request.method in ("GET", "HEAD")
        and "text/html" in request.headers.get("accept", "")
        and not path.startswith("/api/")
        and not path.endswith(".json")
    )


class AdminAccess:
    """The two checks of the module's docstring, in front of every route.

    Sets ``request.state.trusted`` (the full ``/health`` may be shown) and
    ``request.state.session`` (the browser's session id, or None)."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: frozenset[str],
        token: str | None,
        sessions: Sessions,
        attempts: LoginAttempts | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token
        self.sessions = sessions
        self.attempts = attempts or LoginAttempts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path = request.url.path
        host = request.headers.get("host", "")
        state = scope.setdefault("state", {})
        known_host = host_name(host) in self.hosts
        if not known_host and path not in PUBLIC:
            message = (
                f"Host {host!r} is not a name of this admin port; "
                "allow it with --admin-host (FREEZEFRAME_ADMIN_HOSTS)"
            )
            await JSONResponse({"error": message}, status_code=421)(scope, receive, send)
            return
        sid = request.cookies.get(SESSION_COOKIE)
        signed_in = self.sessions.valid(sid)
        state["session"] = sid if signed_in else None
        allowed = self.token is None or signed_in
        if not allowed and self.token is not None and "authorization" in request.headers:
            client = request.client.host if request.client else ""
            wait = 0 if path in PUBLIC else self.attempts.wait(client)
            if wait:
                await JSONResponse(
                    {"error": f"too many wrong tokens; try again in {wait} s"},
                    status_code=429,
                    headers={"retry-after": str(wait)},
                )(scope, receive, send)
                return
            allowed = bearer_matches(request, self.token)
            if not allowed and path not in PUBLIC:
                self.attempts.failed(client)
        state["trusted"] = known_host and allowed
        if allowed or path in PUBLIC or path == LOGIN or path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        answer: Response
        if _wants_page(request) and "authorization" not in request.headers:
            where = path + (f"?{request.url.query}" if request.url.query else "")
            answer = RedirectResponse(f"{LOGIN}?{urlencode({'next': where})}", status_code=303)
        else:
            answer = JSONResponse(
                {
                    "error": "this admin port asks for its token: "
                    "send 'Authorization: Bearer TOKEN' (the --admin-token), or sign in at /login"
                },
                status_code=401,
                headers={"www-authenticate": 'Bearer realm="freezeframe"'},
            )
        await answer(scope, receive, send)


def _next(target: str | None) -> str:
    """Where to go after signing in: a path on this port only, never another site."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/cassettes"


def _login_form(
    request: Request, target: str | None, status: int = 200, message: str = ""
) -> Response:
    page = (
        AdminContext.of(request)
        .pages.get_template("login.html")
        .render(csrf=csrf_token(request), next=_next(target), message=message)
    )
    return HTMLResponse(page, status_code=status)


def login_refused(request: Request, fields: Mapping[str, str], reason: str) -> Response:
    """A sign-in that ``guard.WriteGuard`` refused: the form again, saying why (403)."""
    return _login_form(request, fields.get("next"), 403, reason)


async def _posted(request: Request) -> dict[str, str]:
    """A form's fields (the case file's forms are url-encoded, never multipart)."""
    body = (await request.body()).decode("utf-8", "replace")
    return dict(parse_qsl(body, keep_blank_values=True))


async def login_page(request: Request) -> Response:
    if AdminContext.of(request).settings.admin_token is None:
        return RedirectResponse("/cassettes", status_code=303)
    return _login_form(request, request.query_params.get("next"))


async def sign_in(request: Request) -> Response:
    """Sign in with the admin token, at most LOGIN_FAILURES wrong ones a window per client
    (``LoginAttempts``); the guard has checked the form's CSRF token already."""
    admin = AdminContext.of(request)
    token, attempts = admin.settings.admin_token, admin.attempts
    fields = await _posted(request)
    target = fields.get("next")
    if token is None:
        return RedirectResponse(_next(target), status_code=303)
    client = request.client.host if request.client else ""
    wait = attempts.wait(client)
    if wait:
        refused = _login_form(
            request, target, 429, f"Too many wrong tokens; try again in {wait} s."
        )
        refused.headers["retry-after"] = str(wait)
        return refused
    offered = fields.get("token", "").strip().encode()
    if not hmac.compare_digest(offered, token.encode()):
        attempts.failed(client)
        return _login_form(request, target, 401, "That is not the admin token of this proxy.")
    attempts.succeeded(client)
    answer = RedirectResponse(_next(target), status_code=303)
    answer.set_cookie(
        SESSION_COOKIE,
        admin.sessions.open(),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="strict",
    )
    return answer


async def sign_out(request: Request) -> Response:
    admin = AdminContext.of(request)
    admin.sessions.close(request.cookies.get(SESSION_COOKIE))
    guarded = admin.settings.admin_token is not None
    answer = RedirectResponse(LOGIN if guarded else "/cassettes", status_code=303)
    answer.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return answer


LOGIN_ROUTES: list[BaseRoute] = [
    Route(LOGIN, login_page, methods=["GET"]),
    Route(LOGIN, sign_in, methods=["POST"]),
    Route(LOGOUT, sign_out, methods=["POST"]),
]
"""``/login`` (the form, and its post) and ``/logout``."""
