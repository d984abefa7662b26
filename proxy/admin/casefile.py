"""The case file: the web pages of the admin port, each with its JSON twin.

A page and its twin come from one view: the view builds the read model's document (the one
``show --json`` and the admin API print, from ``evidence``), answers it as JSON when the URL
ends in ``.json`` or the client asks for ``application/json`` only, and otherwise renders it
with a Jinja2 template (autoescaped: recorded bytes are text, never markup). Store reads run
in the thread pool, as the admin API's do, since the proxy shares the event loop.

A cassette may be named ``x.json``: ``/cassettes/x.json`` is its page when it exists, and
``/cassettes/x.json.json`` its twin.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from freezeframe.canonicalize import KeyConfig, canonicalize
from freezeframe.evidence import (
    agent_steps,
    cassette_document,
    conversation_document,
    conversation_of,
    exchange_document,
    miss_document,
    search_document,
    steps_document,
    summary_document,
)
from freezeframe.evidence.compare import compare_runs, diff_document, read_run
from freezeframe.evidence.inert import inert
from freezeframe.evidence.notes import note_document, note_hit, with_notes
from freezeframe.evidence.requests import stored_view
from freezeframe.evidence.signatures import KINDS
from freezeframe.evidence.steps import HTTP
from freezeframe.evidence.triage import (
    Group,
    find_group,
    find_groups,
    last_recheck,
    parse_duration,
    run_marks,
    timeline,
    triage_document,
)
from freezeframe.evidence.triage import numbers as group_numbers
from freezeframe.evidence.words import plural
from freezeframe.evidence.words import size as readable_size
from freezeframe.proxy.admin import present
from freezeframe.proxy.admin.context import AdminContext
from freezeframe.proxy.admin.guard import csrf_token
from freezeframe.storage import (
    CassetteNotFound,
    CassetteSummary,
    Exchange,
    ExchangeFilter,
    ExchangeNotFound,
    ExchangeSummary,
    Outcome,
    ReadStore,
    RecordedResponse,
)
from freezeframe.storage.encodings import decode_body
from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name

if TYPE_CHECKING:
    from jinja2 import Environment, Template

HERE = Path(__file__).parent
HTMX = "htmx-2.0.7.min.js"
"""The vendored htmx (https://htmx.org, 0BSD: static/htmx-LICENSE.txt), pinned by its name."""
PAGE_ROWS = 200
"""Rows of a waterfall page; a long run is paged, so its page opens as fast as a short one."""
EDIT_BYTES = present.PREVIEW_BYTES
"""The largest answer the edit form holds: a page never carries more of a body than this."""
POLL = "every 2s"
"""How often a live list (cassettes, misses) asks again."""

View = Callable[[Request], Awaitable[Response]]


class NotHere(Exception):
    """A page about something the store does not have; the message says what (404)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request names once ``.json`` is taken off, and whether it wants JSON."""

    name: str
    json: bool


class Pages:
    """The case file's templates, loaded when the first page is rendered: jinja2 and its
    environment are 15 ms of CPU at every start of a proxy whose admin port may never serve
    a page (#30)."""

    def __init__(self) -> None:
        self._environment: Environment | None = None

    def get_template(self, name: str) -> Template:
        if self._environment is None:
            self._environment = templates()
        return self._environment.get_template(name)


def templates() -> Environment:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    environment = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_inert,
    )
    environment.globals["htmx"] = HTMX
    environment.globals["poll"] = POLL
    environment.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    environment.filters["ms"] = lambda s: "-" if s is None else f"{float(s) * 1000:.0f} ms"
    environment.filters["size"] = _size
    environment.filters["when"] = _when
    environment.filters["plural"] = plural
    environment.filters["jsonpath"] = _jsonpath
    return environment


_STEP = re.compile(r"\.|(?=\[)")


def _jsonpath(path: str) -> Markup:
    """A JSON path that a narrow column wraps between its steps (after a ``.``, before a
    ``[``) and never inside a key: ``$.messages[3].content`` read as ``$.mess`` / ``ages[3]``
    is a path that does not exist. The path is escaped first (it is recorded, so untrusted);
    escaping writes no ``.`` or ``[``, so the only markup added is the ``<wbr>``."""
    return Markup(_STEP.sub(lambda m: m.group(0) + "<wbr>", str(escape(path))))


def _inert(value: Any) -> Any:
    """Every value a page shows, its control characters written as visible escapes: a page
    saved or fetched with curl into a terminal must not command it (OSC 52 writes the
    clipboard), and a browser shows them as nothing at all, hiding what was recorded."""
    if isinstance(value, Markup):
        return Markup(inert(str(value)))
    return inert(value) if isinstance(value, str) else value


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(n: int | None) -> str:
    return "-" if n is None else readable_size(n)


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    """A page: ``template`` with ``context`` and what every page shows (mode, CSRF token)."""
    admin = AdminContext.of(request)
    page = admin.pages.get_template(template).render(
        request=request,
        csrf=csrf_token(request),
        signed_in=request.scope.get("state", {}).get("session") is not None,
        mode=admin.runtime.mode.value,
        default_cassette=admin.runtime.cassette,
        **context,
    )
    return HTMLResponse(page, status_code=status)


Build = Callable[[Request, Asked], Awaitable[dict[str, Any]]]
"""What a page shows: its ``document`` (the JSON twin) and the rest of its context."""


async def page(template: str, build: Build, param: str, request: Request) -> Response:
    """A view answering ``build``'s ``document`` as JSON, or the page around it; a route
    binds the first three with ``functools.partial`` (``_page``)."""
    raw = request.path_params.get(param, "") if param else ""
    try:
        asked = await _asked(raw, request, param)
        context = await build(request, asked)
    except (NotHere, CassetteNotFound, ExchangeNotFound) as exc:
        return _problem(request, _asked_json(request, raw), 404, str(exc))
    except (ValueError, InvalidCassetteName) as exc:
        return _problem(request, _asked_json(request, raw), 400, str(exc))
    if asked.json:
        return JSONResponse(context["document"])
    return render(request, template, **context)


def _page(template: str, build: Build, param: str = "") -> View:
    return functools.partial(page, template, build, param)


def _asked_json(request: Request, raw: str) -> bool:
    return raw.endswith(".json") or request.url.path.endswith(".json") or wants_json(request)


def _problem(request: Request, as_json: bool, status: int, message: str) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status)
    return render(request, "problem.html", status=status, message=message)


async def _asked(raw: str, request: Request, param: str) -> Asked:
    as_json = request.url.path.endswith(".json") or wants_json(request)
    if param != "name" or not raw.endswith(".json"):
        return Asked(raw, as_json)
    if await run_in_threadpool(AdminContext.of(request).store.has_cassette, raw):
        return Asked(raw, wants_json(request))
    return Asked(raw.removesuffix(".json"), True)


def _seq(request: Request) -> tuple[int, bool]:
    raw = request.path_params["seq"]
    number = raw.removesuffix(".json")
    if not number.isdigit():
        raise NotHere(f"no exchange {raw!r}: an exchange is named by its seq, a number")
    return int(number), raw.endswith(".json") or wants_json(request)


async def cassettes_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    query = request.query_params
    where = ExchangeFilter.parse(
        _given(query.get("run_id")), _given(query.get("model")), _given(query.get("status"))
    )
    rows = await run_in_threadpool(store.cassettes, where)
    health: list[dict[str, Any]] = [{} for _ in rows]
    if not asked.json:  # the twin is /api/cassettes; misses.json and run.json say the rest
        health = await run_in_threadpool(lambda: [_health(store, row) for row in rows])
    return {
        "document": [cassette_document(row) for row in rows],
        "rows": list(zip(rows, health, strict=True)),
        "filters": {k: query.get(k, "") for k in ("run_id", "model", "status")},
    }


async def run_page(request: Request, asked: Asked) -> dict[str, Any]:
    admin = AdminContext.of(request)
    store = admin.store
    name = validate_cassette_name(asked.name)
    query = request.query_params
    status, outcome = _given(query.get("status")), _given(query.get("outcome"))
    if status and outcome:
        raise ValueError("filter by a status or by an outcome, not both")
    where = ExchangeFilter.parse(
        _given(query.get("run_id")),
        _given(query.get("model")),
        status or outcome,
        _given(query.get("host")),
    )
    if asked.json:
        rows = await run_in_threadpool(store.exchanges, name, where)
        return {"document": [summary_document(row) for row in rows]}
    overview = await run_in_threadpool(store.overview, name, where)
    whole = overview if where is None else await run_in_threadpool(store.overview, name)
    pages = max((overview.exchanges + PAGE_ROWS - 1) // PAGE_ROWS, 1)
    number = min(max(_int(query.get("page"), 1), 1), pages)
    shown = await run_in_threadpool(
        lambda: store.exchanges(name, where, offset=(number - 1) * PAGE_ROWS, limit=PAGE_ROWS)
    )
    span = (overview.first_at or 0.0, overview.last_end or 1.0)
    said = await run_in_threadpool(_said, store, name, shown)
    kept = await run_in_threadpool(store.tape, name)
    return {
        "name": name,
        "said": said,
        "tape": None if kept is None else {"at": kept.at, **json.loads(kept.document)},
        "groups": _groups(present.waterfall(shown, span), query.get("group") == "run_id"),
        "figures": overview,
        "hosts": whole.hosts,
        "outcomes": [o.value for o in Outcome],
        "filters": {
            k: query.get(k, "") for k in ("run_id", "model", "status", "host", "outcome", "group")
        },
        "page": number,
        "pages": pages,
        "page_link": lambda n: "?" + urlencode({**dict(query), "page": str(n)}),
        "tally": admin.runtime.tally.document(),
    }


async def steps_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    name = validate_cassette_name(asked.name)
    exchanges = await run_in_threadpool(_whole_run, store, name)
    document = steps_document(await run_in_threadpool(agent_steps, exchanges))
    rows = await run_in_threadpool(lambda: store.triage_rows(cassettes=[name], traces=True))
    document["triage"] = await run_in_threadpool(run_marks, rows, exchanges)
    notes = await run_in_threadpool(store.notes, name)
    document["notes"] = [note_document(n) for n in notes]
    marked: dict[int, list[dict[str, Any]]] = {}
    for failure in document["triage"]["failures"]:
        for seq in failure["spans"]:
            marked.setdefault(seq, []).append(failure)
    return {"document": document, "name": name, "marked": marked}


async def triage_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    query = request.query_params
    filters = {k: query.get(k, "") for k in ("since", "cassette", "kind", "group")}
    since = _given(filters["since"])
    window = None if since is None else parse_duration(since)
    group = _given(filters["group"])

    def grouped() -> tuple[list[Group], dict[str, int]]:
        numbered = group_numbers(store)
        if group is not None:  # GROUP: a number, a signature or a unique prefix of one
            return [find_group(store, group)], numbered
        found = find_groups(
            store,
            since=window,
            pattern=_given(filters["cassette"]),
            kind=_given(filters["kind"]),
        )
        return found, numbered

    found, numbered = await run_in_threadpool(grouped)
    document = triage_document(found, detail=True, numbered=numbered)
    document["timeline"] = timeline(found)
    kept = await run_in_threadpool(store.rechecks)
    for group in document["groups"]:
        last = kept.get(group["signature"])
        group["last_recheck"] = None if last is None else last_recheck(last)
    return {"document": document, "filters": filters, "kinds": KINDS}


async def misses_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    name = validate_cassette_name(asked.name)
    found = await run_in_threadpool(store.misses, name)
    return {"document": [miss_document(miss) for miss in found], "name": name}


async def exchange_view(request: Request) -> Response:
    admin = AdminContext.of(request)
    store = admin.store
    name = request.path_params["name"]
    try:
        validate_cassette_name(name)
        seq, as_json = _seq(request)
        found = await run_in_threadpool(store.exchange, name, seq)
    except (NotHere, CassetteNotFound, ExchangeNotFound) as exc:
        return _problem(request, _asked_json(request, request.path_params["seq"]), 404, str(exc))
    except InvalidCassetteName as exc:
        return _problem(request, wants_json(request), 400, str(exc))
    notes = await run_in_threadpool(store.notes, name, seq)
    document = with_notes(exchange_document(found), notes)
    if as_json:
        return JSONResponse(document)
    context = await run_in_threadpool(_exchange_context, store, found, admin.config)
    return render(request, "exchange.html", document=document, name=name, notes=notes, **context)


async def body_download(request: Request) -> Response:
    store = AdminContext.of(request).store
    name, side = request.path_params["name"], request.path_params["side"]
    try:
        validate_cassette_name(name)
        seq, _ = _seq(request)
        found = await run_in_threadpool(store.exchange, name, seq)
    except (NotHere, CassetteNotFound, ExchangeNotFound, InvalidCassetteName) as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    if side not in ("request", "response"):
        problem = f"no body {side!r}: request or response"
        return JSONResponse({"error": problem}, status_code=404)
    if side == "request":
        data, ref = found.recorded.request_body, found.recorded.request_body_ref
    elif found.recorded.response is not None:
        data, ref = found.recorded.response.body, found.recorded.response.body_ref
    else:
        return JSONResponse({"error": f"{name}#{seq} has no answer"}, status_code=404)
    headers = {
        "content-disposition": f'attachment; filename="{name}-{seq}-{side}.bin"',
    }
    if ref is None:
        return Response(data, media_type="application/octet-stream", headers=headers)
    headers["content-length"] = str(ref.size)
    return StreamingResponse(
        iterate_in_threadpool(store.read_blob(ref)),
        media_type="application/octet-stream",
        headers=headers,
    )


async def search_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    query = request.query_params.get("q", "")
    cassette = request.query_params.get("cassette") or None
    if cassette is not None:
        validate_cassette_name(cassette)
    hits = await run_in_threadpool(store.search, query, cassette) if query else []
    noted = await run_in_threadpool(store.search_notes, query, cassette) if query else []
    return {
        "document": [search_document(hit) for hit in hits] + [note_hit(n) for n in noted],
        "q": query,
        "cassette": cassette or "",
    }


async def compare_page(request: Request, asked: Asked) -> dict[str, Any]:
    store = AdminContext.of(request).store
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    if not a or not b:
        if asked.json:
            raise ValueError("compare needs ?a=RUN&b=RUN (CASSETTE or CASSETTE@RUN_ID)")
        names = await run_in_threadpool(store.cassette_names)
        return {"document": None, "a": a, "b": b, "names": names}
    left = await run_in_threadpool(read_run, store, a)
    right = await run_in_threadpool(read_run, store, b)
    document = diff_document(await run_in_threadpool(compare_runs, a, left, b, right))
    names = await run_in_threadpool(store.cassette_names)
    return {"document": document, "a": a, "b": b, "names": names}


async def favicon(request: Request) -> Response:
    return Response(present.FAVICON, media_type="image/svg+xml")


PAGES: list[BaseRoute] = [
    Route("/favicon.ico", favicon),
    Route("/cassettes", _page("cassettes.html", cassettes_page)),
    Route("/cassettes.json", _page("cassettes.html", cassettes_page)),
    Route("/cassettes/{name}/steps", _page("steps.html", steps_page, "name")),
    Route("/cassettes/{name}/steps.json", _page("steps.html", steps_page, "name")),
    Route("/cassettes/{name}/misses", _page("misses.html", misses_page, "name")),
    Route("/cassettes/{name}/misses.json", _page("misses.html", misses_page, "name")),
    Route("/cassettes/{name}/{seq}/body/{side:str}", body_download),
    Route("/cassettes/{name}/{seq}", exchange_view),
    Route("/cassettes/{name}", _page("run.html", run_page, "name")),
    Route("/search", _page("search.html", search_page)),
    Route("/search.json", _page("search.html", search_page)),
    Route("/triage", _page("triage.html", triage_page)),
    Route("/triage.json", _page("triage.html", triage_page)),
    Route("/compare", _page("compare.html", compare_page)),
    Route("/compare.json", _page("compare.html", compare_page)),
    Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
]
"""The pages, their twins, body downloads and the static files."""


def _given(text: str | None) -> str | None:
    """A form's field as a filter: an empty field asks for nothing."""
    return text.strip() or None if text is not None else None


def _int(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isdigit() else default


def _groups(rows: list[present.Row], by_run: bool) -> list[tuple[str | None, list[present.Row]]]:
    """The rows under one heading, or under one per run id (in order of first appearance)."""
    if not by_run:
        return [(None, rows)]
    groups: dict[str, list[present.Row]] = {}
    for row in rows:
        groups.setdefault(row.summary.context.get("run-id", "(no run id)"), []).append(row)
    return list(groups.items())


def _health(store: ReadStore, row: CassetteSummary) -> dict[str, Any]:
    """What the cassette list says of each cassette beside its size: how many exchanges
    failed (counted with the listing, unless it was filtered: then counted here), how many
    misses replay noted, and what it was forked from."""
    name = row.name
    origin = store.fork_origin(name)
    forked = None
    if origin is not None:
        forked = {"cassette": origin.cassette, "upto": origin.upto}
    return {
        "failed": store.overview(name).failed if row.failed is None else row.failed,
        "misses": len(store.misses(name)),
        "forked_from": forked,
    }


def _said(
    store: ReadStore, name: str, shown: list[ExchangeSummary]
) -> dict[int, tuple[str, str | None]]:
    """Per exchange of a waterfall page, what it was (the model's answer or the tool called,
    as the steps page titles it; plain HTTP's title is its URL, already on the line) and why
    it failed, if it did. Answers too large to hold are
    read from their listing alone."""
    small = [row.seq for row in shown if row.response_bytes <= present.PREVIEW_BYTES]
    steps = agent_steps([store.exchange(name, seq) for seq in small]).steps
    return {
        step.seq: ("" if step.kind == HTTP else step.title, step.failure)
        for step in steps
        if step.kind != HTTP or step.failure
    }


def _whole_run(store: ReadStore, name: str) -> list[Exchange]:
    return [store.exchange(name, row.seq) for row in store.exchanges(name)]


def _exchange_context(store: ReadStore, exchange: Exchange, config: KeyConfig) -> dict[str, Any]:
    """What the exchange page shows beside the document: the conversation, body previews,
    the stream chart; bodies kept in the store are read only as far as a preview goes."""
    conversation = conversation_of(exchange)
    response = exchange.recorded.response
    content_type = "" if response is None else present.content_type(response.headers)
    chart = None
    cut = exchange.recorded.outcome is Outcome.TRUNCATED  # the chart shows where
    if response is not None and (cut or present.streamed(response, content_type)):
        size = response.body_ref.size if response.body_ref is not None else len(response.body)
        chart = present.stream_chart([[c.offset, c.at] for c in response.chunks], size)
    return {
        "conversation": None if conversation is None else conversation_document(conversation),
        "request_preview": present.preview(
            store,
            exchange.recorded.request_body,
            exchange.recorded.request_body_ref,
            exchange.recorded.request_headers,
        ),
        "response_preview": None
        if response is None
        else present.preview(store, response.body, response.body_ref, response.headers),
        "chart": chart,
        "closed_normally": present.closed_normally(exchange),
        "json_answer": "json" in content_type.lower(),
        "editable": response is not None and response.body_ref is None,
        "edit_body": _editable_text(response),
        "edit_example": present.example_path(exchange),
        "stripped": canonicalize(stored_view(exchange), config).stripped,
        "shown_metadata": present.shown_facts(exchange.recorded.facts),
    }


def _editable_text(response: RecordedResponse | None) -> str:
    """The answer's body, decoded, for the edit form: when it is text and not too long."""
    if response is None or response.body_ref is not None:
        return ""
    found = decode_body(response.body, response.headers)
    if not found.whole or len(found.data) > EDIT_BYTES:
        return ""
    try:
        return found.data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
