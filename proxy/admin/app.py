"""Routes of the admin API: health, the CA, and the runtime mode.

Store reads run in the thread pool: the admin API shares its event loop with the
proxy, and a slow listing must never stall proxied traffic.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from addons.state import Mode, RuntimeState, format_pace, parse_pace
from storage import CassetteNotFound, ExchangeFilter, Store
from storage.names import InvalidCassetteName, validate_cassette_name


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _where(request: Request) -> ExchangeFilter | None:
    """``?run_id=&model=&status=``, the filters of ``ls`` and ``show``."""
    query = request.query_params
    return ExchangeFilter.parse(query.get("run_id"), query.get("model"), query.get("status"))


def create_app(store: Store, state: RuntimeState, ca_path: Path, proxy_address: str) -> Starlette:
    def mode_document() -> dict[str, Any]:
        return {
            "mode": state.mode.value,
            "cassette": state.cassette,
            "pace": format_pace(state.pace),
        }

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "proxy": proxy_address, **mode_document()})

    async def ca_pem(request: Request) -> Response:
        return Response(ca_path.read_bytes(), media_type="application/x-pem-file")

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
        return JSONResponse(mode_document())

    async def reset(request: Request) -> JSONResponse:
        state.reset()
        return JSONResponse(mode_document())

    async def cassettes(request: Request) -> JSONResponse:
        try:
            where = _where(request)
        except ValueError as exc:
            return _error(400, f"GET /api/cassettes: {exc}")
        rows = await run_in_threadpool(store.cassettes, where)
        return JSONResponse([asdict(row) for row in rows])

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
        return JSONResponse([asdict(row) for row in rows])

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/ca.pem", ca_pem),
            Route("/api/mode", get_mode, methods=["GET"]),
            Route("/api/mode", put_mode, methods=["PUT"]),
            Route("/api/replay/reset", reset, methods=["POST"]),
            Route("/api/cassettes", cassettes),
            Route("/api/cassettes/{name}", cassette),
        ]
    )
