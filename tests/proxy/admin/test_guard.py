"""The write guard holds for every route: no route of the admin app, and no route added to
it later, changes anything for a request from another site, because ``guard.WriteGuard``
answers it before the router does (the admin app in-process, over a real SQLite store)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient
from starlette.types import Message

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.admin.guard import CSRF_COOKIE
from freezeframe.proxy.settings import Address, Settings
from freezeframe.storage import open_store

ADMIN = "127.0.0.1:8081"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
CROSS_SITE = (
    {"origin": "https://evil.example", "content-type": "application/json"},
    {"sec-fetch-site": "cross-site", "content-type": "text/plain"},
    {"content-type": "application/x-www-form-urlencoded"},  # a form post without its token
)
PARAMS = {"name": "bug-8821", "seq": "0", "side": "request", "path": "casefile.css"}
"""A value for every path parameter a route of the admin app has."""


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Starlette]:
    with open_store(f"sqlite:///{tmp_path / 'freezeframe.db'}") as store:
        settings = Settings(data_dir=tmp_path, admin=Address.parse(ADMIN, "admin"))
        yield create_app(store, RuntimeState(Mode.REPLAY, "bug-8821"), settings)


def test_no_route_takes_a_write_from_another_site(app: Starlette) -> None:
    """Every route, with every state-changing method, refused 403 before it runs: a
    GET-only route is not left to its 405, nor a write route to its own check."""
    paths = []
    for route in app.routes:
        assert isinstance(route, Route | Mount), route
        paths.append(route.path_format.format(**PARAMS))
    known = {"/api/mode", "/api/cassettes/bug-8821/0/edit", "/login", "/static/casefile.css"}
    assert known <= set(paths)
    with TestClient(app, base_url=f"http://{ADMIN}", follow_redirects=False) as client:
        for path in paths:
            for method in WRITES:
                for headers in CROSS_SITE:
                    body = b'{"mode": "record"}'
                    if "form" in headers["content-type"]:
                        body = urlencode({"mode": "record", "into": "stolen"}).encode()
                    answer = client.request(method, path, headers=headers, content=body)
                    where = (method, path, headers)
                    assert answer.status_code == 403, where
                    if path == "/login":  # the sign-in form, saying why
                        assert 'id="problem"' in answer.text and "refused" in answer.text, where
                    else:
                        assert answer.json()["error"].endswith("refused"), where
        assert client.get("/api/mode").json()["mode"] == "replay"
        assert client.get("/api/cassettes").json() == []


@pytest.mark.asyncio
async def test_a_route_added_later_is_guarded_and_gets_the_form_it_was_posted(
    app: Starlette,
) -> None:
    """No route checks the rules itself, so one added tomorrow cannot forget them; and a
    form's body, read by the guard for its token, still reaches the route whole."""
    reached: list[dict[str, str]] = []

    async def note(request: Request) -> JSONResponse:
        fields = await request.form()
        reached.append({k: str(v) for k, v in fields.items()})
        return JSONResponse({"noted": len(reached)})

    app.router.routes.append(Route("/api/notes", note, methods=["POST", "DELETE"]))
    token = "a-token-the-case-file-set"  # double submit: the cookie and the field agree
    same_site = {
        "origin": f"http://{ADMIN}",
        "sec-fetch-site": "same-origin",
        "cookie": f"{CSRF_COOKIE}={token}",
    }
    transport = httpx.ASGITransport(app=app)
    async with (
        asyncio.timeout(30),  # a route left waiting for a body the guard kept fails here
        httpx.AsyncClient(transport=transport, base_url=f"http://{ADMIN}") as client,
    ):
        for method in ("POST", "DELETE"):
            for headers in CROSS_SITE:
                refused = await client.request(
                    method, "/api/notes", headers=headers, content=b"x=1"
                )
                assert refused.status_code == 403, (method, headers)
        assert reached == []

        wrong = await client.post(
            "/api/notes", data={"csrf_token": token[:-1] + "x"}, headers=same_site
        )
        assert wrong.status_code == 403 and "does not match" in wrong.json()["error"]
        text = "ünïcode & more " * 2000  # ~30 KB
        posted = await client.post(
            "/api/notes", data={"csrf_token": token, "text": text}, headers=same_site
        )
        assert posted.status_code == 200 and reached == [{"csrf_token": token, "text": text}]
        script = await client.post(
            "/api/notes", content=b'{"a": 1}', headers={"content-type": "application/json"}
        )
        assert script.status_code == 200, "a script's post (no Origin, no form) passes"


@pytest.mark.asyncio
async def test_a_form_sent_in_pieces_is_checked_whole_and_handed_on_whole(app: Starlette) -> None:
    """The guard reads a form to its end for its token, then gives the route the same
    bytes; a client that leaves halfway gets no answer and reaches no route."""
    reached: list[bytes] = []

    async def note(request: Request) -> JSONResponse:
        reached.append(await request.body())
        return JSONResponse({})

    app.router.routes.append(Route("/api/notes", note, methods=["POST"]))
    token = "a-token-the-case-file-set"  # double submit: the cookie and the field agree
    body = urlencode({"text": "a" * 5000, "csrf_token": token}).encode()
    pieces = [body[n : n + 1000] for n in range(0, len(body), 1000)]

    async def post(messages: list[Message]) -> list[Message]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "server": ("127.0.0.1", 8081),
            "client": ("127.0.0.1", 50000),
            "root_path": "",
            "path": "/api/notes",
            "raw_path": b"/api/notes",
            "query_string": b"",
            "headers": [
                (b"host", ADMIN.encode()),
                (b"origin", f"http://{ADMIN}".encode()),
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"cookie", f"{CSRF_COOKIE}={token}".encode()),
            ],
        }
        waiting = iter(messages)
        sent: list[Message] = []

        async def receive() -> Message:
            return next(waiting, {"type": "http.disconnect"})

        async def send(message: Message) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    whole = await post(
        [
            {"type": "http.request", "body": piece, "more_body": n < len(pieces) - 1}
            for n, piece in enumerate(pieces)
        ]
    )
    assert whole[0]["status"] == 200 and reached == [body]
    gone = await post([{"type": "http.request", "body": pieces[0], "more_body": True}])
    assert gone == [] and reached == [body]
