"""Routes of the admin API (health, the CA, the runtime mode, the recordings, forks and
edits) and the case file's pages beside them.

Store reads and writes run in the thread pool: the admin API shares its event loop with
the proxy, and a slow listing must never stall proxied traffic. Every document about a
recording comes from ``evidence``, the read model ``show --json`` prints too. Every request
passes ``access`` first (the Host allow-list, the admin token), then ``guard.WriteGuard``,
which lets a request that may change something through only from the case file or a script
(same origin, CSRF): no handler here checks either. Each handler is a function of the
request and reads the store, the runtime state and the settings from ``context``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import asdict
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from freezeframe.addons.state import Mode, RuntimeState, format_pace, parse_pace
from freezeframe.evidence import (
    cassette_document,
    exchange_document,
    miss_document,
    search_document,
    summary_document,
)
from freezeframe.evidence.notes import with_notes
from freezeframe.proxy.admin.access import (
    LOGIN,
    LOGIN_ROUTES,
    AdminAccess,
    LoginAttempts,
    Sessions,
    login_refused,
)
from freezeframe.proxy.admin.casefile import PAGES, Pages
from freezeframe.proxy.admin.context import AdminContext
from freezeframe.proxy.admin.guard import (
    FORM,
    SecurityHeaders,
    WriteGuard,
    allowed_hosts,
    media_type,
)
from freezeframe.proxy.keys import key_config
from freezeframe.proxy.notices import empty_cassette
from freezeframe.proxy.settings import Settings
from freezeframe.proxy.trust import CLIENT_BUNDLE
from freezeframe.storage import (
    CassetteNotFound,
    Exchange,
    ExchangeFilter,
    ExchangeNotFound,
    Forked,
    Store,
    StoreError,
)
from freezeframe.storage.encodings import decode_body
from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name
from freezeframe.whatif.editing import AnswerEdit, Assignment, edited

log = logging.getLogger("freezeframe")

ROUTES = (
    ("GET", "/", "this index (a browser is sent to the case file, /cassettes)"),
    ("GET", "/health", "status, mode, addresses, where the CA and store are, what was done"),
    ("GET", "/ca.pem", "the CA certificate clients must trust"),
    ("GET", "/login", "the case file's sign-in form, when the port has an admin token"),
    ("POST", "/login", "sign in: token=TOKEN (sets a session cookie)"),
    ("POST", "/logout", "sign out"),
    ("GET", "/metrics", "counts for Prometheus: recorded, 429s, truncations, hits, misses, store"),
    ("GET", "/api/mode", "mode, default cassette and replay pace"),
    ("PUT", "/api/mode", 'switch: {"mode": ..., "cassette": ..., "pace": ...}'),
    ("POST", "/api/replay/reset", "start replay from the top"),
    ("GET", "/api/events", "?after=N: what the proxy did with each request since event N"),
    ("GET", "/api/cassettes", "the cassettes (freezeframe ls --json); ?run_id=&model=&status="),
    ("GET", "/api/cassettes/{name}", "a cassette's exchanges (freezeframe show NAME --json)"),
    ("GET", "/api/cassettes/{name}/{seq}", "one exchange (freezeframe show NAME SEQ --json)"),
    ("GET", "/api/cassettes/{name}/misses", "replay's misses, newest first (show NAME --misses)"),
    ("GET", "/api/search", "?q=PHRASE&cassette=NAME: exchanges holding it (freezeframe search)"),
    ("POST", "/api/cassettes/{name}/fork", '{"into": NAME, "upto": SEQ}: freezeframe fork'),
    (
        "POST",
        "/api/cassettes/{name}/{seq}/edit",
        '{"into": NAME, "body": TEXT, "set": ["$.a=1"], "status": N, "headers": ["K: V"]}: '
        "freezeframe edit",
    ),
    ("GET", "/cassettes", "the case file: cassettes (each page: .json for its JSON twin)"),
    ("GET", "/cassettes/{name}", "a run's waterfall; ?run_id=&model=&status=&host=&outcome="),
    ("GET", "/cassettes/{name}/steps", "a run's agent steps"),
    ("GET", "/cassettes/{name}/misses", "replay's misses, newest first"),
    ("GET", "/cassettes/{name}/{seq}", "one exchange"),
    ("GET", "/cassettes/{name}/{seq}/body/{side}", "a body, whole (side: request, response)"),
    ("GET", "/search", "search; ?q=&cassette="),
    ("GET", "/compare", "two runs step by step; ?a=RUN&b=RUN"),
)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _where(request: Request) -> ExchangeFilter | None:
    """``?run_id=&model=&status=``, the filters of ``ls`` and ``show``."""
    query = request.query_params
    return ExchangeFilter.parse(query.get("run_id"), query.get("model"), query.get("status"))


class BadForm(ValueError):
    """A fork or edit asked for with fields that do not fit; the message says which."""


def mode_document(runtime: RuntimeState) -> dict[str, Any]:
    return {
        "mode": runtime.mode.value,
        "cassette": runtime.cassette,
        "pace": format_pace(runtime.pace),
    }


async def index(request: Request) -> Response:
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse("/cassettes", status_code=303)
    return JSONResponse(
        {
            "freezeframe": AdminContext.of(request).about["version"],
            "routes": [
                {"method": method, "path": path, "what": what} for method, path, what in ROUTES
            ],
        }
    )


async def health(request: Request) -> JSONResponse:
    admin = AdminContext.of(request)
    problem = await run_in_threadpool(admin.store.health)
    if not request.state.trusted:
        public: dict[str, Any] = {"status": "ok" if problem is None else "degraded"}
        if admin.settings.admin_token is not None:
            public["admin_token"] = "required"
        return JSONResponse(public)
    return JSONResponse(
        {
            "status": "ok" if problem is None else "degraded",
            **admin.about,
            **mode_document(admin.runtime),
            "store_problem": problem,
            "tally": admin.runtime.tally.document(),
        }
    )


async def ca_pem(request: Request) -> Response:
    path = AdminContext.of(request).settings.ca_path
    return Response(path.read_bytes(), media_type="application/x-pem-file")


async def metrics(request: Request) -> Response:
    # A thread: a scrape may read the store (failures by kind, proxy.metrics).
    from freezeframe.proxy.metrics import CONTENT_TYPE

    counts = AdminContext.of(request).metrics
    return Response(await run_in_threadpool(counts.render), media_type=CONTENT_TYPE)


async def get_mode(request: Request) -> JSONResponse:
    return JSONResponse(mode_document(AdminContext.of(request).runtime))


async def put_mode(request: Request) -> Response:
    admin = AdminContext.of(request)
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        return _error(400, f"PUT /api/mode: body is not JSON: {exc}")
    if not isinstance(body, dict) or not set(body) <= {"mode", "cassette", "pace"}:
        return _error(400, 'PUT /api/mode: expected {"mode": ..., "cassette": ..., "pace": ...}')
    try:
        mode = Mode.parse(str(body["mode"])) if "mode" in body else None
        cassette = validate_cassette_name(str(body["cassette"])) if "cassette" in body else None
        pace = parse_pace(str(body["pace"])) if "pace" in body else None
    except (ValueError, InvalidCassetteName) as exc:
        return _error(400, f"PUT /api/mode: {exc}")
    runtime = admin.runtime
    runtime.switch(mode, cassette, pace)
    document = mode_document(runtime)
    if runtime.mode is Mode.REPLAY:
        notice = await run_in_threadpool(empty_cassette, admin.store, runtime.cassette)
        if notice is not None:
            log.warning("%s", notice)
            document["warning"] = notice
    return JSONResponse(document)


async def reset(request: Request) -> Response:
    runtime = AdminContext.of(request).runtime
    runtime.reset()
    return JSONResponse(mode_document(runtime))


async def events(request: Request) -> JSONResponse:
    try:
        after = int(request.query_params.get("after", "0"))
    except ValueError:
        return _error(400, "GET /api/events: ?after= takes an event number")
    journal = AdminContext.of(request).runtime.journal
    found = journal.after(after)
    return JSONResponse({"last": journal.last, "events": [event.document() for event in found]})


async def cassettes(request: Request) -> JSONResponse:
    try:
        where = _where(request)
    except ValueError as exc:
        return _error(400, f"GET /api/cassettes: {exc}")
    rows = await run_in_threadpool(AdminContext.of(request).store.cassettes, where)
    return JSONResponse([cassette_document(row) for row in rows])


async def cassette(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    try:
        where = _where(request)
    except ValueError as exc:
        return _error(400, f"GET /api/cassettes/{name}: {exc}")
    try:
        rows = await run_in_threadpool(AdminContext.of(request).store.exchanges, name, where)
    except CassetteNotFound as exc:
        return _error(404, str(exc))
    return JSONResponse([summary_document(row) for row in rows])


async def exchange(request: Request) -> JSONResponse:
    store = AdminContext.of(request).store
    name, seq = request.path_params["name"], request.path_params["seq"]
    try:
        found = await run_in_threadpool(store.exchange, name, seq)
    except (CassetteNotFound, ExchangeNotFound) as exc:
        return _error(404, str(exc))
    notes = await run_in_threadpool(store.notes, name, seq)
    return JSONResponse(with_notes(exchange_document(found), notes))


async def cassette_misses(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    try:
        validate_cassette_name(name)
    except InvalidCassetteName as exc:
        return _error(400, str(exc))
    found = await run_in_threadpool(AdminContext.of(request).store.misses, name)
    return JSONResponse([miss_document(miss) for miss in found])


async def search(request: Request) -> JSONResponse:
    query = request.query_params.get("q", "")
    cassette = request.query_params.get("cassette")
    try:
        if cassette is not None:
            validate_cassette_name(cassette)
    except InvalidCassetteName as exc:
        return _error(400, f"GET /api/search: {exc}")
    hits = await run_in_threadpool(AdminContext.of(request).store.search, query, cassette)
    return JSONResponse([search_document(hit) for hit in hits])


async def fork(request: Request) -> Response:
    store = AdminContext.of(request).store
    source = request.path_params["name"]
    form, asked = await _posted(request)
    try:
        target = validate_cassette_name(_text(asked, "into"))
        upto = _number(asked, "upto")
        forked = await run_in_threadpool(
            lambda: store.fork(validate_cassette_name(source), target, upto=upto)
        )
    except (BadForm, InvalidCassetteName) as exc:
        return _done_badly(request, form, 400, f"fork {source}: {exc}")
    except CassetteNotFound as exc:
        return _done_badly(request, form, 404, str(exc))
    except StoreError as exc:
        return _done_badly(request, form, 409, str(exc))
    if form is not None:
        return RedirectResponse(f"/cassettes/{target}", status_code=303)
    return JSONResponse(asdict(forked), status_code=201)


async def edit(request: Request) -> Response:
    admin = AdminContext.of(request)
    source, seq = request.path_params["name"], request.path_params["seq"]
    form, asked = await _posted(request)
    try:
        target = validate_cassette_name(_text(asked, "into"))
        change = _answer_edit(asked)

        def make() -> tuple[Forked, tuple[str, ...]]:
            found = admin.store.exchange(validate_cassette_name(source), seq)
            made = edited(found, _from_form(found, change) if form else change, admin.config)
            return admin.store.fork(source, target, edits={seq: made}), made.changes

        forked, changes = await run_in_threadpool(make)
    except (BadForm, InvalidCassetteName) as exc:
        return _done_badly(request, form, 400, f"edit {source}#{seq}: {exc}")
    except (CassetteNotFound, ExchangeNotFound) as exc:
        return _done_badly(request, form, 404, str(exc))
    except (ValueError, StoreError) as exc:  # EditError is a ValueError
        return _done_badly(request, form, 409 if isinstance(exc, StoreError) else 400, str(exc))
    if form is not None:
        return RedirectResponse(f"/cassettes/{target}/{seq}", status_code=303)
    document = asdict(forked) | {"seq": seq, "changes": list(changes)}
    return JSONResponse(document, status_code=201)


def _done_badly(
    request: Request, form: dict[str, str] | None, status: int, message: str
) -> Response:
    """A failed fork or edit: JSON for a script, a page for a browser's form."""
    if form is None:
        return _error(status, message)
    admin = AdminContext.of(request)
    page = admin.pages.get_template("problem.html").render(
        message=message, mode=admin.runtime.mode.value
    )
    return HTMLResponse(page, status_code=status)


API: list[BaseRoute] = [
    Route("/", index),
    Route("/health", health),
    Route("/ca.pem", ca_pem),
    Route("/metrics", metrics),
    Route("/api/mode", get_mode, methods=["GET"]),
    Route("/api/mode", put_mode, methods=["PUT"]),
    Route("/api/replay/reset", reset, methods=["POST"]),
    Route("/api/events", events),
    Route("/api/cassettes", cassettes),
    Route("/api/cassettes/{name}", cassette),
    Route("/api/cassettes/{name}/{seq:int}", exchange),
    Route("/api/cassettes/{name}/misses", cassette_misses),
    Route("/api/search", search),
    Route("/api/cassettes/{name}/fork", fork, methods=["POST"]),
    Route("/api/cassettes/{name}/{seq:int}/edit", edit, methods=["POST"]),
]
"""The API's routes; the sign-in routes (access) and the case file's pages follow them."""


def create_app(store: Store, state: RuntimeState, settings: Settings) -> Starlette:
    """The admin app: its parts made once and kept on ``app.state.admin`` for the handlers,
    and the middleware every request passes, outermost first: the security headers, the
    door (``access``: Host, token), then the write guard (``guard``: same origin, CSRF)."""
    data_dir = settings.data_dir.absolute()
    hosts = allowed_hosts(settings.admin, settings.admin_hosts)
    admin = AdminContext(
        store=store,
        runtime=state,
        settings=settings,
        hosts=hosts,
        config=key_config(settings.rules),
        pages=Pages(),
        sessions=Sessions(),
        attempts=LoginAttempts(),
        about={
            "proxy": str(settings.listen),
            "admin": str(settings.admin),
            "reverse": [
                {"name": t.name, "url": t.url, "listen": f"{settings.listen.host}:{t.port}"}
                for t in settings.reverse
            ],
            "data_dir": str(data_dir),
            "ca": str(data_dir / settings.ca_path.name),
            "ca_bundle": str(data_dir / CLIENT_BUNDLE),
            "store": store.location,
            "version": version("freezeframe"),
        },
    )
    app = Starlette(
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(
                AdminAccess,
                hosts=hosts,
                token=settings.admin_token,
                sessions=admin.sessions,
                attempts=admin.attempts,
            ),
            Middleware(WriteGuard, hosts=hosts, refusals={LOGIN: login_refused}),
        ],
        routes=[*API, *LOGIN_ROUTES, *PAGES],
    )
    app.state.admin = admin
    return app


async def _posted(request: Request) -> tuple[dict[str, str] | None, dict[str, Any]]:
    """A post's fields: a form's (then also returned as the form), or a JSON object's."""
    body = await request.body()
    if media_type(request.headers) == FORM:
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        return form, dict(form)
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return None, {}
    return None, found if isinstance(found, dict) else {}


def _text(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        raise BadForm(f"{name!r} is required: the name of the new cassette")
    return value.strip()


def _number(fields: dict[str, Any], name: str) -> int | None:
    value = fields.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise BadForm(f"{name!r} must be a whole number, not {value!r}")


def _lines(value: Any) -> list[str]:
    """A form's textarea (one item a line) or a JSON list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise BadForm(f"expected a list of strings, not {value!r}")


def _answer_edit(fields: dict[str, Any]) -> AnswerEdit:
    """The edit a post asks for."""
    body = fields.get("body") or None
    if body is not None and not isinstance(body, str):
        raise BadForm("'body' must be text")
    headers = []
    for line in _lines(fields.get("headers")):
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadForm(f"header {line!r}: expected 'Name: value'")
        headers.append((name.strip(), value.strip()))
    return AnswerEdit(
        body=body.encode() if body is not None else None,
        sets=tuple(Assignment.parse(text) for text in _lines(fields.get("set"))),
        status=_number(fields, "status"),
        headers=tuple(headers),
        source="the case file's form",
    )


def _from_form(exchange: Exchange, change: AnswerEdit) -> AnswerEdit:
    """A form's edit as meant: its body field shows the recorded answer, so an unchanged one
    is no change; a browser sends a textarea's lines ended by CRLF, which go back to LF
    when the recording had none; and a new body for a JSON answer must be JSON."""
    response = exchange.recorded.response
    if response is None or change.body is None:
        return change
    recorded = decode_body(response.body, response.headers).data
    body = change.body
    if b"\r" not in recorded:
        body = body.replace(b"\r\n", b"\n")
    if body == recorded:
        return dataclasses.replace(change, body=None)
    kind = next((v for n, v in response.headers if n.lower() == b"content-type"), b"")
    if b"json" in kind.lower():
        try:
            json.loads(body)
        except ValueError as exc:
            raise BadForm(f"the answer is JSON, and the new body is not: {exc}") from None
    return dataclasses.replace(change, body=body)
