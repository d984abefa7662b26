"""The ``freezeframe`` command line.

Each command resolves settings (flag > environment variable > default), calls one
library function, and renders the result: a rich table for people, one JSON document
on stdout for machines (``--json``). Errors are one line on stderr with a non-zero exit;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlsplit

import click
import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from addons.rewrites import JSONRPC_ID_REWRITE, Rewrite, instant_rewrites, jsonrpc_id
from canonicalize import RequestView, canonicalize
from proxy import settings as settings_module
from proxy.command import CAPTURES, Confinement, run_command
from proxy.keys import key_config, rules_path
from proxy.rekey import rekey as rekey_cassette
from proxy.serve import StartupError, serve
from proxy.trust import client_bundle, ensure_ca, java_truststore
from proxy.wiring import SHELLS, client_environment, render
from storage import (
    BlobRef,
    Exchange,
    ExchangeFilter,
    ExchangeSummary,
    Message,
    Store,
    StoreError,
    open_store,
)
from storage.names import InvalidCassetteName, validate_cassette_name
from storage.redaction import Redactor, load_or_create_key

PIPED_WIDTH = 200
"""Columns of a table printed to a pipe or file, where no terminal says how wide to be."""


class FreezeframeGroup(click.Group):
    """Turns every expected failure into one line on stderr, unless ``--debug``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (StoreError, StartupError, InvalidCassetteName, ValueError, OSError) as exc:
            if ctx.meta.get("freezeframe.debug"):
                raise
            _fail(str(exc))


class _Separated(click.types.StringParamType):
    """A repeatable option whose environment variable separates values with ``sep``
    (click would split on whitespace, which breaks regexes with spaces)."""

    def __init__(self, sep: str) -> None:
        self.envvar_list_splitter = sep


def _fail(message: str) -> NoReturn:
    click.echo(f"freezeframe: error: {message}", err=True)
    sys.exit(1)


def _debug_option(f: Callable[..., Any]) -> Callable[..., Any]:
    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        ctx.meta["freezeframe.debug"] = value
        return value

    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Show tracebacks and debug logs.",
    )(f)


def _setting(flag: str, help: str, *names: str, **kwargs: Any) -> Callable[..., Any]:
    """An option backed by its ``FREEZEFRAME_*`` variable, as the contract's table says."""
    kwargs.setdefault("envvar", "FREEZEFRAME_" + flag.lstrip("-").replace("-", "_").upper())
    kwargs.setdefault("show_default", kwargs.get("default") is not None)
    return click.option(flag, *names, show_envvar=True, help=help, **kwargs)


def _store_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = _setting(
        "--store",
        "SQLAlchemy URL of the store  [default: sqlite:///<data dir>/freezeframe.db]",
        metavar="URL",
    )(f)
    return _setting(
        "--data-dir",
        "Where the CA, the secret key and the default store live.",
        default=settings_module.DEFAULT_DATA_DIR,
    )(f)


def _open(data_dir: str, store: str | None) -> Store:
    return open_store(store or settings_module.default_store_url(Path(data_dir).expanduser()))


def _emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))


def _time(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


@click.group(cls=FreezeframeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="freezeframe")
def main() -> None:
    """Record the exact bytes an agent exchanges over HTTP(S); replay them later.

    \b
    Example:
        freezeframe run --mode record --cassette bug-8821
        HTTPS_PROXY=http://127.0.0.1:8080 SSL_CERT_FILE=$(freezeframe ca --bundle) python agent.py
    """


def _run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The settings of a proxy, shared by ``run`` and ``exec``."""
    for option in reversed(_RUN_OPTIONS):
        f = option(f)
    return _store_options(f)


_RUN_OPTIONS = [
    _setting("--mode", "record, replay, auto or passthrough.", default="record"),
    _setting(
        "--cassette",
        "Default cassette; X-Freezeframe-Cassette overrides it per request.",
        default="default",
    ),
    _setting(
        "--listen",
        "Proxy address (HTTPS_PROXY points here).",
        default=settings_module.DEFAULT_LISTEN,
    ),
    _setting("--admin", "Admin API address.", default=settings_module.DEFAULT_ADMIN),
    _setting(
        "--upstream-ca",
        "Extra CA (PEM) trusted for upstream servers, on top of the system's.",
        metavar="FILE",
    ),
    _setting(
        "--replay-pace",
        "recorded, instant, or a factor on recorded delays (0.5 = twice as fast).",
        default="recorded",
    ),
    _setting(
        "--rules",
        "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]",
        metavar="FILE",
    ),
    _setting(
        "--reverse",
        "Also serve plain HTTP on PORT, forwarded to URL (repeatable; env: comma-separated).",
        multiple=True,
        metavar="NAME=URL@PORT",
        type=_Separated(","),
    ),
    _setting(
        "--upstream-proxy",
        "Forward through this proxy: http(s)://[user:password@]host:port.",
        metavar="URL",
    ),
    _setting(
        "--redact-header",
        "Another header never to store in the clear (repeatable; env: comma-separated).",
        "redact_headers",
        envvar="FREEZEFRAME_REDACT_HEADERS",
        multiple=True,
        metavar="NAME",
        type=_Separated(","),
    ),
    _setting(
        "--redact-pattern",
        "A regex whose matches in bodies are never stored (repeatable; env: one per line).",
        "redact_patterns",
        envvar="FREEZEFRAME_REDACT_PATTERNS",
        multiple=True,
        metavar="REGEX",
        type=_Separated("\n"),
    ),
    _setting(
        "--annotate",
        "Add X-Freezeframe-Hit/-Drift/-Rewrite/-Miss/-Recorded headers to answers.",
        is_flag=True,
        default=False,
    ),
]


@main.command()
@_run_options
@_debug_option
def run(**options: Any) -> None:
    """Start the proxy and the admin API; stop with Ctrl-C or SIGTERM.

    \b
    Example:
        freezeframe run --mode replay --cassette bug-8821
    """
    settings = settings_module.build(**options)
    _configure_logging(click.get_current_context().meta.get("freezeframe.debug", False))
    asyncio.run(serve(settings))


@main.command(name="exec")
@_run_options
@click.option(
    "--proxy",
    "proxy_url",
    default=None,
    metavar="URL",
    help="Use this running proxy instead of starting one (its CA is read from --data-dir).",
)
@_setting(
    "--capture",
    "Also record clients that ignore proxy settings: transparent (a network namespace "
    "whose every connection reaches the proxy; root) or local (mitmproxy's eBPF redirector).",
    type=click.Choice(CAPTURES),
)
@_setting(
    "--isolate/--no-isolate",
    "Run COMMAND in a network namespace where only the proxy is reachable  "
    "[default: on in replay where the system allows it]",
    envvar="FREEZEFRAME_ISOLATE",
    default=None,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_debug_option
def exec_(
    command: tuple[str, ...],
    proxy_url: str | None,
    capture: str | None,
    isolate: bool | None,
    **options: Any,
) -> None:
    """Run COMMAND through a proxy started for it (or a running one); exit with its status.

    COMMAND gets HTTPS_PROXY, HTTP_PROXY, NO_PROXY and the CA variables of every common
    HTTP stack (see `freezeframe env`). In replay it runs where only the proxy is
    reachable, so a client that ignores those variables fails instead of reaching a real
    service; --capture transparent records and replays such clients too. Put `--` before
    the command.

    \b
    Example:
        freezeframe exec --mode replay --cassette bug-8821 -- python agent.py
        sudo freezeframe exec --capture transparent --cassette bug-8821 -- node agent.js
    """
    data_dir = Path(options["data_dir"]).expanduser()
    settings = None if proxy_url else settings_module.build(**options)
    _configure_logging(click.get_current_context().meta.get("freezeframe.debug", False))
    confinement = Confinement(capture=capture, isolate=isolate)
    sys.exit(asyncio.run(run_command(command, data_dir, settings, proxy_url, confinement)))


@main.command()
@click.option(
    "--shell",
    type=click.Choice(SHELLS),
    default="sh",
    show_default=True,
    help="sh (export lines), fish (set -gx), or dotenv (an env_file for docker compose).",
)
@_setting(
    "--admin",
    "Admin API of the running proxy (asked where its proxy listens).",
    default=settings_module.DEFAULT_ADMIN,
)
@_setting(
    "--data-dir",
    "Where the CA, the secret key and the default store live.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@_debug_option
def env(shell: str, admin: str, data_dir: str) -> None:
    """Print the environment lines a client needs for a running proxy.

    \b
    Example:
        eval "$(freezeframe env)"
        freezeframe env --shell fish | source
        freezeframe env --shell dotenv > agent.env
    """
    address = settings_module.Address.parse(admin, "admin address")
    url = f"http://{address.url_host}:{address.port}/health"
    try:
        health = httpx.get(url, timeout=5.0, trust_env=False).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise StartupError(
            f"no freezeframe answers at {url} ({exc}); start one with `freezeframe run`"
        ) from None
    listen = settings_module.Address.parse(str(health["proxy"]), "proxy address")
    path = Path(data_dir).expanduser()
    environment = client_environment(
        f"http://{listen.url_host}:{listen.port}",
        ensure_ca(path),
        client_bundle(path),
        java_truststore(path),
    )
    click.echo(render(environment, shell), nl=False)


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("mitmproxy").setLevel(logging.DEBUG if debug else logging.WARNING)
    for noisy in ("hpack", "passlib", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--run-id``, ``--model`` and ``--status``, handed to the command as ``where``."""

    @functools.wraps(f)
    def command(run_id: str | None, model: str | None, status: str | None, **kw: Any) -> Any:
        try:
            where = ExchangeFilter.parse(run_id, model, status)
        except ValueError as exc:
            raise ValueError(f"--{exc}") from None
        return f(where=where, **kw)

    command = click.option(
        "--status",
        metavar="STATUS",
        help="Only exchanges with this HTTP status (429) or outcome (truncated, failed, ...).",
    )(command)
    command = click.option(
        "--model", metavar="MODEL", help="Only exchanges that asked for or were answered by MODEL."
    )(command)
    return click.option(
        "--run-id", metavar="ID", help="Only exchanges sent with X-Freezeframe-Run-Id: ID."
    )(command)


@main.command(name="ls")
@_store_options
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def ls(
    data_dir: str,
    store: str | None,
    where: ExchangeFilter | None,
    as_json: bool,
) -> None:
    """List cassettes: name, exchanges, first and last time, size stored.

    With a filter, only cassettes holding a matching exchange are listed, and
    "exchanges" counts the matching ones.

    \b
    Example:
        freezeframe ls --json
        freezeframe ls --run-id ci-4411 --status 429
    """
    opened = _open(data_dir, store)
    try:
        rows = opened.cassettes(where)
    finally:
        opened.close()
    if as_json:
        _emit_json([asdict(row) for row in rows])
        return
    table = Table("cassette", "exchanges", "first", "last", "stored")
    for row in rows:
        table.add_row(
            row.name,
            str(row.exchanges),
            _time(row.first_at),
            _time(row.last_at),
            _size(row.stored_bytes),
        )
    _console().print(table)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@main.command()
@click.argument("cassette")
@click.argument("seq", type=int, required=False)
@_store_options
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def show(
    cassette: str,
    seq: int | None,
    data_dir: str,
    store: str | None,
    where: ExchangeFilter | None,
    as_json: bool,
) -> None:
    """The exchanges of a cassette in recorded order, or one exchange whole.

    The list shows each exchange's model and how many replays found its request
    drifted; one exchange shows its metadata, its drift and its rewrites in full.

    \b
    Example:
        freezeframe show bug-8821
        freezeframe show bug-8821 --model gpt-4o --status 429
        freezeframe show bug-8821 3 --json
    """
    validate_cassette_name(cassette)
    if where is not None and seq is not None:
        raise ValueError("--run-id, --model and --status filter the list; drop them with SEQ")
    opened = _open(data_dir, store)
    try:
        if seq is None:
            rows = opened.exchanges(cassette, where)
        else:
            exchange = opened.exchange(cassette, seq)
    finally:
        opened.close()
    if seq is not None:
        document = exchange_document(exchange)
        if as_json:
            _emit_json(document)
        else:
            _print_exchange(document)
        return
    if as_json:
        _emit_json([asdict(row) for row in rows])
        return
    _print_exchanges(rows)


def _print_exchanges(rows: Sequence[ExchangeSummary]) -> None:
    """The list of ``show``; the model and drift columns appear when some row has them."""
    models = [str(r.facts.get("answered_model") or r.facts.get("model") or "-") for r in rows]
    with_model = any(model != "-" for model in models)
    with_drift = any(row.drifted for row in rows)
    table = Table("seq", "started", "method", "status", "outcome", "ms", "bytes")
    if with_model:
        table.add_column("model", overflow="fold")
    if with_drift:
        table.add_column("drift", justify="right")
    table.add_column("url", overflow="fold")
    for row, model in zip(rows, models, strict=True):
        cells = [
            str(row.seq),
            _time(row.started_at),
            row.method,
            str(row.status) if row.status is not None else "-",
            row.outcome.value,
            f"{row.duration * 1000:.0f}" if row.duration is not None else "-",
            str(row.response_bytes),
        ]
        cells += [model] if with_model else []
        cells += [str(row.drifted) if row.drifted else "-"] if with_drift else []
        table.add_row(*cells, row.url)
    _console().print(table)


def _console() -> Console:
    """A terminal's own width; piped output as wide as a table needs, never cut to 80."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPED_WIDTH)
    return console


def _headers(fields: Sequence[tuple[bytes, bytes]]) -> list[list[str]]:
    return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in fields]


def _body(data: bytes, ref: BlobRef | None = None) -> dict[str, Any]:
    if ref is not None:  # too large to hold in memory for printing
        return {"bytes": ref.size, "blake3": ref.digest, "omitted": "larger than shown inline"}
    try:
        return {"text": data.decode("utf-8"), "bytes": len(data)}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii"), "bytes": len(data)}


def exchange_document(exchange: Exchange) -> dict[str, Any]:
    """The one JSON shape of a whole exchange, used by ``show --json`` and the admin API."""
    response = exchange.response
    return {
        "cassette": exchange.cassette,
        "seq": exchange.seq,
        "occurrence": exchange.occurrence,
        "key": exchange.key,
        "key_scheme": exchange.key_scheme,
        "outcome": exchange.outcome.value,
        "error": exchange.error,
        "context": dict(exchange.context),
        "timing": {
            "started_at": exchange.started_at,
            "first_byte_after": response.first_byte_at if response else None,
            "duration": exchange.duration,
        },
        "request": {
            "method": exchange.method,
            "url": exchange.url,
            "http_version": exchange.http_version,
            "headers": _headers(exchange.request_headers),
            "body": _body(exchange.request_body, exchange.request_body_ref),
            "canonical": json.loads(exchange.canonical),
        },
        "response": None
        if response is None
        else {
            "status": response.status,
            "reason": response.reason,
            "http_version": response.http_version,
            "headers": _headers(response.headers),
            "trailers": _headers(response.trailers),
            "body": _body(response.body, response.body_ref),
            "chunks": [[c.offset, round(c.at, 6)] for c in response.chunks],
        },
        "rewrites": [asdict(r) for r in _rewrites(exchange)],
        "metadata": dict(exchange.facts),
        "stripped": None if exchange.stripped is None else dict(exchange.stripped),
        "drift": [
            {"at": d.at, "paths": list(d.paths), "context": dict(d.context)} for d in exchange.drift
        ],
        "messages": None if exchange.messages is None else [_message(m) for m in exchange.messages],
        "chain": exchange.chain,
    }


def _message(message: Message) -> dict[str, Any]:
    """One WebSocket message: who sent it, when, and its payload as text or base64."""
    document: dict[str, Any] = {
        "from": "client" if message.from_client else "server",
        "type": "text" if message.text else "binary",
        "at": round(message.at, 6),
    }
    return document | _body(message.data)


def _rewrites(exchange: Exchange) -> list[Rewrite]:
    """What replay changes in this recording's answer, and when (see addons.rewrites)."""
    if exchange.response is None:
        return []
    found = list(instant_rewrites(exchange.response.headers)[1])
    if jsonrpc_id(exchange.request_body) is not None:
        found.append(JSONRPC_ID_REWRITE)
    return found


def _print_exchange(document: dict[str, Any]) -> None:
    console = Console()
    request, response = document["request"], document["response"]
    console.print(
        f"[bold]#{document['seq']}[/] {request['method']} {request['url']}  "
        f"({document['outcome']}, key {document['key'][:16]}…)",
        highlight=False,
    )
    if document["error"]:
        console.print(f"[red]{document['error']}[/]", highlight=False)
    for name, value in document["context"].items():
        console.print(f"  {name}: {value}", highlight=False)
    for name, value in document["metadata"].items():
        console.print(f"  {name}: {value}", highlight=False, markup=False)
    for rewrite in document["rewrites"]:
        console.print(
            f"  rewritten on replay ({rewrite['when']}): {rewrite['header']}: "
            f"{rewrite['recorded']} -> {rewrite['replayed']}",
            highlight=False,
        )
    for drift in document["drift"]:
        console.print(
            f"  [yellow]drifted[/] on replay at {_time(drift['at'])}: "
            + escape(", ".join(drift["paths"])),
            highlight=False,
        )
    for title, message in (("request", request), ("response", response)):
        if message is None:
            console.print(f"\n[bold]{title}[/]: none")
            continue
        status = f" {message['status']} {message['reason']}" if title == "response" else ""
        console.print(f"\n[bold]{title}[/]{status}", highlight=False)
        for name, value in message["headers"]:
            console.print(f"  {name}: {value}", highlight=False, markup=False)
        body = message["body"]
        console.print(
            body.get("text", f"<{body['bytes']} bytes, not text>"), markup=False, highlight=False
        )
    if document["messages"] is not None:
        console.print(f"\n[bold]websocket[/] {len(document['messages'])} messages")
        for message in document["messages"]:
            payload = message.get("text", f"<{message['bytes']} bytes, binary>")
            console.print(
                f"  {message['at']:9.3f}s {message['from']:>6}: {payload}",
                markup=False,
                highlight=False,
            )


@main.command()
@click.option(
    "--bundle",
    is_flag=True,
    help="Print a bundle of the system's CAs plus freezeframe's (for SSL_CERT_FILE).",
)
@_setting(
    "--data-dir",
    "Where the CA, the secret key and the default store live.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@_debug_option
def ca(bundle: bool, data_dir: str) -> None:
    """Print the path of the CA certificate clients must trust (created if missing).

    \b
    Example:
        export SSL_CERT_FILE=$(freezeframe ca --bundle)
    """
    path = Path(data_dir).expanduser()
    click.echo(str((client_bundle(path) if bundle else ensure_ca(path)).absolute()))


@main.command()
@click.option("--method", required=True, help="HTTP method, e.g. POST.")
@click.option(
    "--url", required=True, help="Full URL, e.g. https://api.openai.com/v1/chat/completions"
)
@click.option(
    "--header", "headers", multiple=True, metavar="'K: V'", help="A request header (repeatable)."
)
@click.option(
    "--body",
    "body_file",
    type=click.File("rb"),
    default=None,
    help="File holding the request body ('-' for stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_setting(
    "--data-dir",
    "Whose secret key fingerprints redacted values, as the proxy does.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
@_debug_option
def explain(
    method: str,
    url: str,
    headers: tuple[str, ...],
    body_file: Any,
    as_json: bool,
    data_dir: str,
    rules: str | None,
) -> None:
    """Show the request key, the canonical form it comes from, and what was stripped.

    \b
    Example:
        freezeframe explain --method POST --url https://api.openai.com/v1/chat/completions \\
            --header 'Content-Type: application/json' --body request.json
    """
    redactor = Redactor(
        load_or_create_key(Path(data_dir).expanduser() / settings_module.KEY_FILENAME)
    )
    view = _view(method, url, headers, body_file.read() if body_file else b"", redactor)
    canonical = canonicalize(view, key_config(rules_path(rules, Path(data_dir).expanduser())))
    document = {
        "key": canonical.key,
        "profile": canonical.profile,
        "body_kind": canonical.body_kind,
        "canonical": json.loads(canonical.form),
        "stripped": [asdict(s) for s in canonical.stripped],
        "warnings": list(canonical.warnings),
    }
    if as_json:
        _emit_json(document)
        return
    console = Console()
    console.print(f"[bold]key[/] {canonical.key}  (profile {canonical.profile})", highlight=False)
    console.print_json(canonical.form.decode())
    if canonical.stripped:
        table = Table("stripped", "rule", "value digest")
        for part in canonical.stripped:
            table.add_row(part.part, part.rule, part.digest)
        console.print(table)
    else:
        console.print("nothing stripped")
    for warning in canonical.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def _view(
    method: str, url: str, headers: tuple[str, ...], body: bytes, redactor: Redactor
) -> RequestView:
    """The request as the proxy would see it: secrets already replaced by markers."""
    parts = urlsplit(redactor.target(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--url {url!r}: expected an absolute http(s) URL")
    pairs = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header {header!r}: expected 'Name: value'")
        value = value.strip()
        if redactor.is_secret_header(name.strip()):
            value = redactor.header_value(value.encode("latin-1")).decode("latin-1")
        pairs.append((name.strip(), value))
    content_type = next((v for k, v in pairs if k.lower() == "content-type"), "")
    return RequestView(
        method=method.upper(),
        scheme=parts.scheme,
        host=parts.hostname,
        port=parts.port or (443 if parts.scheme == "https" else 80),
        path=parts.path or "/",
        query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
        headers=tuple(pairs),
        body=redactor.body(body),
        content_type=content_type,
    )


@main.command()
@click.argument("cassette")
@_store_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def verify(cassette: str, data_dir: str, store: str | None, as_json: bool) -> None:
    """Check the cassette's tamper-evident hash chain; exit 1 on any break.

    \b
    Example:
        freezeframe verify bug-8821 && echo intact
    """
    validate_cassette_name(cassette)
    opened = _open(data_dir, store)
    try:
        report = opened.verify(cassette)
    finally:
        opened.close()
    if as_json:
        _emit_json(asdict(report))
    elif report.ok:
        click.echo(f"{cassette}: intact ({report.checked} exchanges)")
    else:
        click.echo(f"{cassette}: BROKEN at #{report.first_break}: {report.detail}", err=True)
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("cassette")
@_store_options
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def rekey(
    cassette: str,
    data_dir: str,
    store: str | None,
    rules: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Recompute every key under the current rules; report collisions and splits.

    A collision is recordings that had different keys and now share one (replay serves
    them in recorded order); a split is recordings that shared a key and now differ. The
    chain is checked first and re-computed after. Stop any proxy recording into the
    cassette first: it counts occurrences in memory.

    \b
    Example:
        freezeframe rekey bug-8821 --rules rules.toml --dry-run
    """
    validate_cassette_name(cassette)
    config = key_config(rules_path(rules, Path(data_dir).expanduser()))
    opened = _open(data_dir, store)
    try:
        report = rekey_cassette(opened, cassette, config, dry_run=dry_run)
    finally:
        opened.close()
    if as_json:
        _emit_json(asdict(report))
        return
    console = Console()
    verb = "would change" if dry_run else "changed"
    console.print(
        f"{cassette}: {report.checked} exchanges re-keyed, {len(report.changed)} {verb}, "
        f"{len(report.collisions)} collisions, {len(report.splits)} splits",
        highlight=False,
    )
    for title, groups, other in (
        ("collision", report.collisions, "had keys"),
        ("split", report.splits, "now keys"),
    ):
        for group in groups:
            seqs = ", ".join(f"#{seq}" for seq in group.seqs)
            keys = ", ".join(key[:16] for key in group.other_keys)
            console.print(
                f"  [yellow]{title}[/] {group.key[:16]}: {seqs} ({other} {keys})", highlight=False
            )
    if report.kept:
        kept = ", ".join(f"#{seq}" for seq in report.kept)
        console.print(f"  kept (request body too large to re-key here): {kept}", highlight=False)


if __name__ == "__main__":
    main(prog_name="freezeframe")
