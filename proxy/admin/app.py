"""Routes of the admin API: health, the CA, the runtime mode, and the recordings.

Store reads run in the thread pool: the admin API shares its event loop with the
proxy, and a slow listing must never stall proxied traffic. Every document about a
recording comes from ``evidence``, the read model ``show --json`` prints too.
"""

from __future__ import annotations

import json
import logging
from importlib.metadata import version
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from addons.state import Mode, RuntimeState, format_pace, parse_pace
from evidence import (
    cassette_document,
    exchange_document,
    miss_document,
    search_document,
    summary_document,
)
from proxy.notices import empty_cassette
from proxy.settings import Settings
from proxy.trust import CLIENT_BUNDLE
from storage import CassetteNotFound, ExchangeFilter, ExchangeNotFound, Store
from storage.names import InvalidCassetteName, validate_cassette_name

log = logging.getLogger("freezeframe")

ROUTES = (
    ("GET", "/", "this index"),
    ("GET", "/health", "status, mode, addresses, where the CA and store are, what was done"),
    ("GET", "/ca.pem", "the CA certificate clients must trust"),
    ("GET", "/api/mode", "mode, default cassette and replay pace"),
    ("PUT", "/api/mode", 'switch: {"mode": ..., "cassette": ..., "pace": ...}'),
    ("POST", "/api/replay/reset", "start replay from the top"),
    ("GET", "/api/events", "?after=N: what the proxy did with each request since event N"),
    ("GET", "/api/cassettes", "the cassettes (freezeframe ls --json); ?run_id=&model=&status="),
    ("GET", "/api/cassettes/{name}", "a cassette's exchanges (freezeframe show NAME --json)"),
    ("GET", "/api/cassettes/{name}/{seq}", "one exchange (freezeframe show NAME SEQ --json)"),
    ("GET", "/api/cassettes/{name}/misses", "replay's misses, newest first (show NAME --misses)"),
    ("GET", "/api/search", "?q=PHRASE&cassette=NAME: exchanges holding it (freezeframe search)"),
)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _where(request: Request) -> ExchangeFilter | None:
    """``?run_id=&model=&status=``, the filters of ``ls`` and ``show``."""
    query = request.query_params
    return ExchangeFilter.parse(query.get("run_id"), query.get("model"), query.get("status"))


def create_app(store: Store, state: RuntimeState, settings: Settings) -> Starlette:
    data_dir = settings.data_dir.absolute()
    about = {
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
    }

    def mode_document() -> dict[str, Any]:
        return {
            "mode": state.mode.value,
            "cassette": state.cassette,
            "pace": format_pace(state.pace),
        }

    async def index(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "freezeframe": about["version"],
                "routes": [
                    {"method": method, "path": path, "what": what} for method, path, what in ROUTES
                ],
            }
        )

    async def health(request: Request) -> JSONResponse:
        problem = await run_in_threadpool(store.health)
        return JSONResponse(
            {
                "status": "ok" if problem is None else "degraded",
                **about,
                **mode_document(),
                "store_problem": problem,
                "tally": state.tally.document(),
            }
        )

    async def ca_pem(request: Request) -> Response:
        return Response(settings.ca_path.read_bytes(), media_type="application/x-pem-file")

    async def get_mode(request: Request) -> JSONResponse:
        return JSONResponse(mode_document())

    async def put_mode(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            return _error(400, f"PUT /api/mode: body is not JSON: {exc}")
        if not isinstance(body, dict) or not set(body) <= {"mode", "cassette", "pace"}:
            return _error(
                400, 'PUT /api/mode: expected {"mode": ..., "cassette": ..., "pace": ...}'
            )
        try:
            mode = Mode.parse(str(body["mode"])) if "mode" in body else None
            cassette = validate_cassette_name(str(body["cassette"])) if "cassette" in body else None
            pace = parse_pace(str(body["pace"])) if "pace" in body else None
        except (ValueError, InvalidCassetteName) as exc:
            return _error(400, f"PUT /api/mode: {exc}")
        state.switch(mode, cassette, pace)
        document = mode_document()
        if state.mode is Mode.REPLAY:
            notice = await run_in_threadpool(empty_cassette, store, state.cassette)
            if notice is not None:
                log.warning("%s", notice)
                document["warning"] = notice
        return JSONResponse(document)

    async def reset(request: Request) -> JSONResponse:
        state.reset()
        return JSONResponse(mode_document())

    async def events(request: Request) -> JSONResponse:
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            return _error(400, "GET /api/events: ?after= takes an event number")
        found = state.journal.after(after)
        return JSONResponse(
            {"last": state.journal.last, "events": [event.document() for event in found]}
        )

    async def cassettes(request: Request) -> JSONResponse:
        try:
            where = _where(request)
        except ValueError as exc:
            return _error(400, f"GET /api/cassettes: {exc}")
        rows = await run_in_threadpool(store.cassettes, where)
        return JSONResponse([cassette_document(row) for row in rows])

    async def cassette(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        try:
            where = _where(request)
        except ValueError as exc:
            return _error(400, f"GET /api/cassettes/{name}: {exc}")
        try:
            rows = await run_in_threadpool(store.exchanges, name, where)
        except CassetteNotFound as exc:
            return _error(404, str(exc))
        return JSONResponse([summary_document(row) for row in rows])

    async def exchange(request: Request) -> JSONResponse:
        name, seq = request.path_params["name"], request.path_params["seq"]
        try:
            found = await run_in_threadpool(store.exchange, name, seq)
        except (CassetteNotFound, ExchangeNotFound) as exc:
            return _error(404, str(exc))
        return JSONResponse(exchange_document(found))

    async def cassette_misses(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        found = await run_in_threadpool(store.misses, name)
        return JSONResponse([miss_document(miss) for miss in found])

    async def search(request: Request) -> JSONResponse:
        query = request.query_params.get("q", "")
        cassette = request.query_params.get("cassette")
        hits = await run_in_threadpool(store.search, query, cassette)
        return JSONResponse([search_document(hit) for hit in hits])

    return Starlette(
        routes=[
            Route("/", index),
            Route("/health", health),
            Route("/ca.pem", ca_pem),
            Route("/api/mode", get_mode, methods=["GET"]),
            Route("/api/mode", put_mode, methods=["PUT"]),
            Route("/api/replay/reset", reset, methods=["POST"]),
            Route("/api/events", events),
            Route("/api/cassettes", cassettes),
            Route("/api/cassettes/{name}", cassette),
            Route("/api/cassettes/{name}/{seq:int}", exchange),
            Route("/api/cassettes/{name}/misses", cassette_misses),
            Route("/api/search", search),
        ]
    )
