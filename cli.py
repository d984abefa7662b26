"""The ``freezeframe`` command line: argument parsing and dispatch.

Each command resolves settings (flag > environment variable > default), calls the library
functions that do its job, and prints what they return: a rich table or lines for people,
one JSON document on stdout for machines (``--json``). Errors are one line on stderr with a
non-zero exit; ``--debug`` shows the traceback. What a command prints is built where its
job is (``evidence.listings``, ``whatif``, ``exchange_formats``, ``sandbox``); where its
store is, its keys and its redactor are worked out once, in ``proxy.located`` and
``proxy.keys``, for every command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from freezeframe import exchange_formats
from freezeframe.evidence.inert import inert
from freezeframe.proxy import settings as settings_module
from freezeframe.proxy.flags import RUN_FLAGS
from freezeframe.storage import CassetteNotFound, ExchangeFilter, Note, Store, StoreError
from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name

if TYPE_CHECKING:
    from freezeframe.proxy.located import Located

# Only what every command needs is imported above: `--help`, `ls` and the other readers
# must answer at once, so the proxy engine (mitmproxy), the HTTP client, rich and the
# what-if machinery are imported inside the commands that use them.

CAPTURES = ("transparent", "local")
"""The values of ``exec --capture`` (``sandbox.command`` checks them against its own)."""
SHELLS = ("sh", "fish", "dotenv")
"""The values of ``env --shell`` (``sandbox.wiring`` renders each)."""
FAILURE_KINDS = (
    "provider_error",
    "upstream_failure",
    "truncation",
    "tool_error",
    "loop",
    "schema",
    "context",
    "ignored_tool_error",
)
"""The values of ``triage --kind`` (``evidence.signatures.KINDS``, which imports jsonschema)."""

PIPED_WIDTH = 200
"""Columns of a table printed to a pipe or file, where no terminal says how wide to be."""


class FreezeframeGroup(click.Group):
    """Turns every expected failure into one line on stderr, unless ``--debug``.

    A usage error (a bad argument, a missing file for an option) keeps click's exit code
    2, as POSIX tools do, but in the same one-line form as every other error.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() ends quietly
        except Exception as exc:
            if not isinstance(exc, _expected_failures()) or ctx.meta.get("freezeframe.debug"):
                raise
            located = ctx.meta.get("freezeframe.located")
            if not isinstance(exc, CassetteNotFound) or located is None:
                _fail(str(exc))
            from freezeframe.proxy.located import suggestion

            _fail(str(exc) + suggestion(located, exc))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            returned = super().main(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        except BrokenPipeError:
            _reader_gone()
        except (
            click.exceptions.NoArgsIsHelpError
        ) as exc:  # bare `freezeframe`: the usage, as git and pip print it
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            returned = 0
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "freezeframe"
            _fail(f"{_sentence(exc.format_message())} (see {where} --help)", exc.exit_code)
        except click.ClickException as exc:
            _fail(_sentence(exc.format_message()), exc.exit_code)
        except click.Abort:
            _fail("aborted")
        sys.exit(returned if isinstance(returned, int) else 0)


def _usage_error(message: str) -> click.UsageError:
    """A mistake in how a command was called (exit 2, as click's own), not in what it read."""
    return click.UsageError(message, click.get_current_context(silent=True))


@contextlib.contextmanager
def _usage() -> Iterator[None]:
    """Arguments that click cannot check itself (``--set``, ``--header``, ``--url``, a
    duration): a ValueError while reading them is a usage error."""
    try:
        yield
    except ValueError as exc:
        raise _usage_error(str(exc)) from None


def _reader_gone() -> NoReturn:
    """``show … | head``: the reader has what it wanted and closed the pipe. End without a
    word and with status 1 (as click and Python's own recipe do), after pointing stdout at
    /dev/null so that the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(1)


def _expected_failures() -> tuple[type[Exception], ...]:
    """The failures that are one line, not a traceback. Those of the proxy's modules are
    named only when a command imported them (else none can have been raised), so that
    reading a store never imports the proxy to name its errors."""
    found: list[type[Exception]] = [StoreError, InvalidCassetteName, ValueError, OSError]
    for module, name in (
        ("freezeframe.proxy.serve", "StartupError"),
        ("freezeframe.proxy.discovery", "NoProxyFound"),
        ("freezeframe.proxy.demo", "DemoFailed"),
    ):
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    return tuple(found)


def _sentence(message: str) -> str:
    """click's messages as one line without a closing full stop, like ours."""
    return " ".join(message.split()).rstrip(".")


class _Separated(click.types.StringParamType):
    """A repeatable option whose environment variable separates values with ``sep``
    (click would split on whitespace, which breaks regexes with spaces)."""

    def __init__(self, sep: str) -> None:
        self.envvar_list_splitter = sep


def _fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr; it may quote what the user or a recording said, so it is inert."""
    click.echo(f"freezeframe: error: {inert(message, newlines=False)}", err=True)
    sys.exit(code)


def _note(message: str) -> None:
    """One line on stderr that is not an error; stdout stays the command's output."""
    click.echo(f"freezeframe: {inert(message, newlines=False)}", err=True)


def _say(line: str) -> None:
    """A line that carries recorded text, which must not command the terminal."""
    click.echo(inert(line, newlines=False))


def _echo(lines: Iterable[str], headings: bool = False) -> None:
    """Lines a library function made for people; section headings (``== ``) in bold on a
    terminal when ``headings`` (click drops the styling in a pipe)."""
    for line in lines:
        bold = headings and line.startswith("== ")
        click.echo(click.style(line, bold=True) if bold else line)


def _emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))


def _console() -> Any:
    """A rich console at the terminal's own width; piped output as wide as a table needs,
    never cut to 80."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPED_WIDTH)
    return console


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep an option's value where every helper of the command finds it (ctx.meta)."""
    ctx.meta[f"freezeframe.{param.name}"] = value
    return value


def _meta(name: str) -> Any:
    return click.get_current_context().meta.get(f"freezeframe.{name}")


def _debug() -> bool:
    return bool(_meta("debug"))


def _debug_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        callback=_remember,
        is_eager=True,
        help="Show tracebacks and debug logs.",
    )(f)


def _setting(flag: str, help: str, *names: str, **kwargs: Any) -> Callable[..., Any]:
    """An option backed by its ``FREEZEFRAME_*`` variable, as the contract's table says."""
    kwargs.setdefault("envvar", "FREEZEFRAME_" + flag.lstrip("-").replace("-", "_").upper())
    kwargs.setdefault("show_default", kwargs.get("default") is not None)
    return click.option(flag, *names, show_envvar=True, help=help, **kwargs)


def _store_options(f: Callable[..., Any], expose: bool = False) -> Callable[..., Any]:
    """--data-dir, --store and --blobs, kept where every store the command opens finds them
    (_located, _given_blobs); given to the command as well when ``expose`` (run, exec)."""
    f = _setting(
        "--blobs",
        "Object store for bodies: s3://BUCKET[/PREFIX] (endpoint and credentials from AWS_*).",
        metavar="URL",
        expose_value=False,
        callback=_remember,
    )(f)
    f = _setting(
        "--store",
        "SQLAlchemy URL of the store  [default: sqlite:///<data dir>/freezeframe.db]",
        metavar="URL",
        expose_value=expose,
        callback=_remember,
    )(f)
    return _setting(
        "--data-dir",
        "Where the CA, the secret key and the default store live.",
        default=settings_module.DEFAULT_DATA_DIR,
        expose_value=expose,
        callback=_remember,
    )(f)


def _given_blobs() -> str | None:
    """The object store the command was given for bodies (--blobs); None: none."""
    return _meta("blobs") or None


def _located() -> Located:
    """The data dir and store URL the command uses (proxy.located.locate), worked out once."""
    from freezeframe.proxy.located import locate

    meta = click.get_current_context().meta
    if "freezeframe.located" not in meta:
        given = _explicit("data_dir") or _explicit("store")
        found = locate(meta["freezeframe.data_dir"], meta["freezeframe.store"], given, _note)
        meta["freezeframe.located"] = found
    located: Located = meta["freezeframe.located"]
    return located


def _open() -> Store:
    """The store the command reads, which must exist; a context manager."""
    return _located().open(_given_blobs())


def _explicit(name: str) -> bool:
    """Whether the user set option ``name`` (flag or variable) rather than its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


_JSON = click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
_RULES = _setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
_ADMIN_TOKEN = _setting(
    "--admin-token",
    "The running proxy's admin token, if it has one (prefer the variable: flags show in ps).",
    metavar="TOKEN",
)
"""How ``env``, ``ca`` and ``replay-reset`` prove themselves to a proxy with a token."""


@click.group(cls=FreezeframeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="freezeframe")
def main() -> None:
    """Record the exact bytes an agent exchanges over HTTP(S); replay them later.

    \b
    Example:
        freezeframe run --mode record --cassette bug-8821 &
        eval "$(freezeframe env --wait 30)"
        python agent.py
    """


def _mode(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A mode that is not one is a usage error (exit 2), as a misspelt flag is."""
    from freezeframe.addons.state import Mode

    try:
        Mode.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None
    return value


def _run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The settings of a proxy (proxy.flags), shared by ``run`` and ``exec``."""
    for flag in reversed(RUN_FLAGS):
        names = [flag.name] if flag.name else []
        kwargs: dict[str, Any] = {"default": flag.default, "metavar": flag.metavar}
        if flag.envvar:
            kwargs["envvar"] = flag.envvar
        if flag.separator:
            kwargs.update(multiple=True, type=_Separated(flag.separator))
        if flag.is_flag:
            kwargs["is_flag"] = True
        if flag.flag == "--mode":
            kwargs["callback"] = _mode
        f = _setting(flag.flag, flag.help, *names, **kwargs)(f)
    return _store_options(f, expose=True)


class _InertFormatter(logging.Formatter):
    """Log lines carry recorded text (URLs, errors, run ids): never a terminal command."""

    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def _configure_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_InertFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=[handler])
    logging.getLogger("mitmproxy").setLevel(logging.DEBUG if debug else logging.WARNING)
    for noisy in ("hpack", "passlib", "asyncio", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@main.command()
@_run_options
@_debug_option
def run(**options: Any) -> None:
    """Start the proxy and the admin API; stop with Ctrl-C or SIGTERM.

    \b
    Example:
        freezeframe run --mode replay --cassette bug-8821
    """
    import asyncio
    import gc

    gc.disable()  # until the proxy serves: proxy.serve.serve_process says why
    from freezeframe.storage.sql import writerprocess

    settings = settings_module.build(**options, blobs=_given_blobs())
    if settings.store_writer == "process":
        writerprocess.start_early()  # it imports the store while this process imports the proxy
    try:
        from freezeframe.proxy.serve import serve_process

        _configure_logging(_debug())
        asyncio.run(serve_process(settings))
    finally:
        writerprocess.forget_early()  # a start that failed before the store opened


@main.command(name="exec")
@_run_options
@click.option(
    "--proxy",
    "proxy_url",
    default=None,
    metavar="URL",
    help="Use this running proxy instead of starting one (its CA is asked of --admin).",
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
@_setting(
    "--clock",
    "Run COMMAND under libfaketime from this time: recorded (the cassette's first request) "
    "or ISO 8601, e.g. 2024-02-29T23:59:30Z.",
    metavar="recorded|TIME",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run COMMAND this many times, run i with seed S+i; then a table of what was "
    "perturbed in each run and its exit status.",
)
@click.option("--json", "as_json", is_flag=True, help="With --runs: one JSON document on stdout.")
@_setting(
    "--strict/--no-strict",
    "In replay: fail when a recorded exchange was never asked for, or was answered out of "
    "recorded order, and name it.",
    envvar="FREEZEFRAME_STRICT",
    default=False,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_debug_option
def exec_(
    command: tuple[str, ...],
    proxy_url: str | None,
    capture: str | None,
    isolate: bool | None,
    clock: str | None,
    runs: int,
    as_json: bool,
    strict: bool,
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
        freezeframe exec --mode replay --cassette bug-8821 --clock recorded -- python agent.py
        freezeframe exec --mode replay --cassette bug-8821 --runs 20 \\
            --perturb '429@api.openai.com/v1/*:0.3,reset@tools.local:0.1' -- python agent.py
    """
    import asyncio

    from freezeframe.proxy.discovery import trust_of_proxy
    from freezeframe.sandbox.aside import output_to_stderr
    from freezeframe.sandbox.clock import faked_clock
    from freezeframe.sandbox.command import Confinement, run_command, run_repeatedly, runs_tables

    _configure_logging(_debug())
    confinement = Confinement(capture=capture, isolate=isolate)
    faked = faked_clock(clock, _open, options["cassette"]) if clock else None
    if options["miss_details"] is None:
        options["miss_details"] = True  # the proxy exec starts answers its one run alone
    if runs > 1 or as_json:
        if proxy_url is not None:
            raise click.UsageError("--runs starts a proxy for each run: drop --proxy")
        if strict:
            raise click.UsageError("--strict checks one run: drop --runs and --json")
        settings = settings_module.build(**options, blobs=_given_blobs())
        with output_to_stderr(as_json):  # stdout is the one JSON document
            done = asyncio.run(
                run_repeatedly(command, settings, runs, confinement=confinement, clock=faked)
            )
        if as_json:
            _emit_json({"runs": [run.document() for run in done]})
        else:
            console = _console()
            for table in runs_tables(done):
                console.print(table)
        sys.exit(0 if all(run.status == 0 for run in done) else 1)
    if proxy_url is None:
        from freezeframe.sandbox.strict import run_with_tape

        settings = settings_module.build(**options, blobs=_given_blobs())
        status, tapes, drifted = asyncio.run(run_with_tape(command, settings, confinement, faked))
        for line in [*drifted, *(line for tape in tapes for line in tape.lines(strict))]:
            _note(line)
        if status == 0 and any(tape.failed(strict) for tape in tapes):
            _fail("--strict: the run left the tape as listed above")
        sys.exit(status)
    if strict:
        raise click.UsageError("--strict reads the journal of the proxy exec starts: drop --proxy")
    explicit = Path(options["data_dir"]).expanduser() if _explicit("data_dir") else None
    trust_of = functools.partial(
        trust_of_proxy, proxy_url, options["admin"], explicit, options["admin_token"]
    )
    sys.exit(
        asyncio.run(
            run_command(
                command,
                proxy_url=proxy_url,
                trust_of=trust_of,
                confinement=confinement,
                clock=faked,
            )
        )
    )


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
    "Admin API of the running proxy (asked where it listens and where its CA is).",
    default=settings_module.DEFAULT_ADMIN,
)
@_setting(
    "--data-dir",
    "Use the CA in this directory instead of the one the running proxy names.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="Wait up to SECONDS for a proxy that is still starting (`run ... &` just before).",
)
@_ADMIN_TOKEN
@_debug_option
def env(shell: str, admin: str, data_dir: str, admin_token: str | None, wait: float) -> None:
    """Print the environment lines a client needs for a running proxy.

    The proxy's address and its CA come from the proxy itself (its admin API), so this
    works from any directory.

    \b
    Example:
        eval "$(freezeframe env)"
        freezeframe run --mode record --cassette first-run &
        eval "$(freezeframe env --wait 30)"
        freezeframe env --shell fish | source
        freezeframe env --shell dotenv > agent.env
    """
    from freezeframe.sandbox.wiring import running_environment

    explicit = Path(data_dir).expanduser() if _explicit("data_dir") else None
    click.echo(running_environment(admin, admin_token, wait, explicit, shell), nl=False)


def _filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--run-id``, ``--model`` and ``--status``, handed to the command as ``where``."""

    @functools.wraps(f)
    def command(run_id: str | None, model: str | None, status: str | None, **kw: Any) -> Any:
        try:
            where = ExchangeFilter.parse(run_id, model, status)
        except ValueError as exc:
            raise _usage_error(f"--{exc}") from None
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
@_JSON
@_debug_option
def ls(where: ExchangeFilter | None, as_json: bool) -> None:
    """List cassettes: name, exchanges, first and last time, size stored.

    With a filter, only cassettes holding a matching exchange are listed, and
    "exchanges" counts the matching ones.

    \b
    Example:
        freezeframe ls --json
        freezeframe ls --run-id ci-4411 --status 429
    """
    with _open() as opened:
        rows = opened.cassettes(where)
    if as_json:
        from freezeframe.evidence.document import cassette_document

        _emit_json([cassette_document(row) for row in rows])
        return
    from freezeframe.evidence.listings import cassettes_table

    _console().print(cassettes_table(rows))


@main.command()
@click.argument("cassette")
@click.argument("seq", type=int, required=False)
@_store_options
@_filter_options
@click.option("--full", is_flag=True, help="With SEQ: every body, chunk and message, uncut.")
@click.option(
    "--misses", is_flag=True, help="The requests replay missed in this cassette, newest first."
)
@click.option(
    "--unused",
    is_flag=True,
    help="The recorded exchanges the last replay (exec) never asked for, or asked out of order.",
)
@_JSON
@_debug_option
def show(
    cassette: str,
    seq: int | None,
    where: ExchangeFilter | None,
    full: bool,
    misses: bool,
    unused: bool,
    as_json: bool,
) -> None:
    """The exchanges of a cassette in recorded order, or one exchange whole.

    The list shows each exchange's model and how many replays found its request
    drifted. One exchange shows everything the store holds about it: request, canonical
    form and what was stripped, response, chunk times, metadata, drift, rewrites and its
    chain link; long bodies are cut after 40 lines unless --full. --misses lists what replay
    could not answer from the cassette, with the nearest recording and where it differs.

    \b
    Example:
        freezeframe show bug-8821
        freezeframe show bug-8821 --model gpt-4o --status 429
        freezeframe show bug-8821 3 --full
        freezeframe show bug-8821 3 --json
        freezeframe show bug-8821 --misses
        freezeframe show bug-8821 --unused
    """
    from freezeframe.evidence import document as documents
    from freezeframe.evidence import listings
    from freezeframe.evidence.notes import with_notes
    from freezeframe.evidence.text import exchange_lines

    validate_cassette_name(cassette)
    if where is not None and seq is not None:
        raise _usage_error("--run-id, --model and --status filter the list; drop them with SEQ")
    if misses or unused:
        flag, listed = ("misses", "misses") if misses else ("unused", "exchanges")
        if seq is not None or where is not None:
            raise _usage_error(f"--{flag} lists a cassette's {listed}; drop SEQ and the filters")
        with _open() as opened:
            if misses:
                found = opened.misses(cassette)
            else:
                kept = documents.tape_document(opened.tape(cassette))
        if misses and as_json:
            _emit_json([documents.miss_document(miss) for miss in found])
        elif misses:
            _echo(listings.misses_lines(cassette, found))
        elif as_json:
            _emit_json(kept)
        else:
            _echo(listings.unused_lines(cassette, kept))
        return
    with _open() as opened:
        if seq is None:
            rows = opened.exchanges(cassette, where)
        else:
            one = documents.exchange_document(opened.exchange(cassette, seq))
        notes = opened.notes(cassette, seq)
    if as_json:
        listed = [documents.summary_document(row) for row in rows] if seq is None else None
        _emit_json(with_notes(one, notes) if seq is not None else listed)
        return
    if seq is None:
        _console().print(listings.exchanges_table(rows))
    else:
        _echo(exchange_lines(one, full=full), headings=True)
    _echo(listings.notes_lines(notes), headings=True)


@main.command()
@click.option(
    "--bundle",
    is_flag=True,
    help="Print a bundle of the system's CAs plus freezeframe's (for SSL_CERT_FILE).",
)
@_setting(
    "--admin",
    "Admin API of the running proxy, asked where its CA is.",
    default=settings_module.DEFAULT_ADMIN,
)
@_setting(
    "--data-dir",
    "Use the CA in this directory instead of asking the running proxy.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@_ADMIN_TOKEN
@_debug_option
def ca(bundle: bool, admin: str, data_dir: str, admin_token: str | None) -> None:
    """Print the path of the CA certificate clients must trust.

    The running proxy (at --admin) says where its CA is; with no proxy running, the CA
    in the default data dir is used. An explicit --data-dir wins. Nothing is created:
    a proxy makes its CA when it first starts.

    \b
    Example:
        export SSL_CERT_FILE=$(freezeframe ca --bundle)
    """
    from freezeframe.proxy.discovery import client_trust

    explicit = Path(data_dir).expanduser() if _explicit("data_dir") else None
    address = settings_module.Address.parse(admin, "admin address")
    trust = client_trust(address, explicit, Path(settings_module.DEFAULT_DATA_DIR), admin_token)
    click.echo(str(trust.bundle if bundle else trust.ca))


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
@_JSON
@_setting(
    "--data-dir",
    "Whose secret key fingerprints redacted values, as the proxy does.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@_RULES
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
    from freezeframe.canonicalize import canonicalize
    from freezeframe.proxy import keys

    directory = Path(data_dir).expanduser()
    body = body_file.read() if body_file else b""
    with _usage():
        view, missing_key = keys.typed_request(method, url, headers, body, directory)
    if missing_key is not None:
        click.echo(
            f"freezeframe: warning: no secret key at {missing_key}, so the secrets in this body "
            "are fingerprinted with a throwaway key and its key differs from the proxy's; "
            "pass the proxy's --data-dir",
            err=True,
        )
    canonical = canonicalize(view, keys.rules_config(rules, directory))
    if as_json:
        _emit_json(keys.explained_document(canonical))
        return
    click.echo(f"{click.style('key', bold=True)} {canonical.key}  (profile {canonical.profile})")
    _echo(keys.explained_lines(canonical))


@main.command()
@click.argument("cassette", required=False)
@_store_options
@click.option(
    "--bundle",
    "bundle_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Check this bundle offline instead: no store, no secret.",
)
@click.option(
    "--trust",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="NAME.pub",
    help="With --bundle: the public key the bundle must be signed with.",
)
@_JSON
@_debug_option
def verify(
    cassette: str | None, bundle_file: Path | None, trust: Path | None, as_json: bool
) -> None:
    """Check the cassette's tamper-evident hash chain; exit 1 on any break.

    Prints the chain head the cassette ends at (write it into the ticket: a later verify
    that prints the same head shows nothing was changed since), and for a fork what it was
    forked from and whether the source still holds it. With --bundle, checks a bundle
    offline: every body against its digest, every exchange against the manifest, the
    Merkle root, and with --trust the signature.

    \b
    Example:
        freezeframe verify bug-8821 && echo intact
        freezeframe verify --bundle bug-8821.ffcase --trust team.pub
    """
    if bundle_file is not None:
        if cassette is not None:
            raise click.UsageError("give a CASSETTE or --bundle FILE, not both")
        checked = exchange_formats.verify_bundle(bundle_file, trust)
        if as_json:
            _emit_json(asdict(checked))
        else:
            _echo(exchange_formats.bundle_lines(bundle_file, checked))
        return
    if cassette is None:
        raise click.UsageError("missing CASSETTE (or --bundle FILE)")
    if trust is not None:
        raise click.UsageError("--trust checks a bundle's signature: add --bundle FILE")
    validate_cassette_name(cassette)
    with _open() as opened:
        report = opened.verify(cassette)
    if as_json:
        _emit_json(asdict(report))
    elif report.ok:
        from freezeframe.evidence.listings import verify_lines

        _echo(verify_lines(cassette, report))
    else:
        click.echo(f"{cassette}: BROKEN at #{report.first_break}: {report.detail}", err=True)
    if not report.ok:
        sys.exit(1)


@main.command(name="export")
@click.argument("cassette")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="The file to write (not with --otlp-endpoint).",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(exchange_formats.EXPORT_FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl: lossless, one exchange a line; bundle: one signed file (.ffcase); har: HAR 1.2; "
    "otel: OTLP JSON Lines; dataset: eval rows, one per model call.",
)
@click.option(
    "--sign",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="NAME.key",
    help="With --format bundle: sign the manifest with this Ed25519 key (freezeframe keygen).",
)
@click.option(
    "--shape",
    type=click.Choice(exchange_formats.SHAPES),
    default=exchange_formats.SHAPES[0],
    show_default=True,
    help="With --format dataset: the field names of this eval tool.",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="With --format otel: send the spans to this OTLP/HTTP collector instead of a file.",
)
@_store_options
@_setting(
    "--rules",
    "With --format bundle: the key rules to carry in it  [default: <data dir>/rules.toml if it "
    "exists]",
    metavar="FILE",
)
@_debug_option
def export(
    cassette: str,
    output: Path | None,
    format_: str,
    sign: Path | None,
    shape: str,
    otlp_endpoint: str | None,
    rules: str | None,
) -> None:
    """Write a cassette to a portable file; secrets stay markers.

    \b
    Example:
        freezeframe export bug-8821 -o bug-8821.jsonl
        freezeframe export bug-8821 -o bug-8821.ffcase --format bundle --sign team.key
        freezeframe export bug-8821 --format otel --otlp-endpoint http://localhost:4318
    """
    validate_cassette_name(cassette)
    if otlp_endpoint is not None and (format_ != "otel" or output is not None):
        raise click.UsageError("--otlp-endpoint sends otel spans instead of writing -o FILE")
    if otlp_endpoint is None and output is None:
        raise click.UsageError("missing -o FILE")
    from freezeframe.proxy.keys import rules_path

    rules_file = rules_path(rules, _located().data_dir)
    with (
        _open() as opened,
        _progress(f"exporting {cassette}", len(opened.exchanges(cassette))) as advance,
    ):
        if otlp_endpoint is not None:
            spans = exchange_formats.send_otel(opened, cassette, otlp_endpoint, advance)
            _say(f"{otlp_endpoint}: sent {spans} spans")
            return
        assert output is not None
        written = exchange_formats.export_cassette(
            opened,
            cassette,
            output,
            format_,
            key=sign,
            rules=rules_file,
            shape=shape,
            progress=advance,
        )
    click.echo(exchange_formats.export_line(output, format_, written))


@main.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--as", "name", metavar="NAME", help="The new cassette's name  [default: the file's]")
@_store_options
@_RULES
@_debug_option
def import_(file: Path, name: str | None, rules: str | None) -> None:
    """Load a file as a new cassette, in one transaction: a freezeframe export (jsonl or
    bundle), a HAR file (Chrome, Firefox, mitmproxy) or a mitmproxy flow file.

    A capture from another tool has its secrets replaced by markers and its requests keyed
    as the proxy would; what it lacks (chunk timing, run context) is said, one line each.
    Like run and exec, import makes the store when there is none (and says so): a bundle
    someone sent can be read in an empty directory. A refused file leaves no store behind.

    \b
    Example:
        freezeframe import bug-8821.ffcase --as bug-8821-review
        freezeframe import session.har --as from-devtools
    """
    from freezeframe.proxy.keys import redactor_in, rules_config
    from freezeframe.storage.leftovers import Made, new_sqlite_files

    if name is not None:
        validate_cassette_name(name)
    place = _located()

    def keeper(cassette: str) -> exchange_formats.Keeper:
        config = rules_config(rules, place.data_dir)
        return exchange_formats.Keeper(cassette, redactor_in(place.data_dir), config)

    # Refused, it leaves nothing: not the store it made, nor the directory or the key.
    made_here = Made([place.data_dir / settings_module.KEY_FILENAME, *new_sqlite_files(place.url)])
    try:
        source, imported, made = exchange_formats.import_file(
            file,
            name,
            keeper,
            lambda: place.open_or_make(_given_blobs()),
            lambda total: _progress(f"importing {file.name}", total),
        )
    except BaseException:
        made_here.undo()
        raise
    if made is not None:  # said once the import held: a refused file's error stays the one line
        _note(f"made a new store at {made}")
    _say(
        f"{imported.cassette}: imported {imported.exchanges} exchanges from {file} "
        f"({source.format}), chain head {imported.head}"
    )
    for note in source.notes:
        _say(f"  {note}")


@main.command()
@click.option(
    "-o",
    "--output",
    "name",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="NAME",
    help="Writes NAME.key (mode 0600) and NAME.pub.",
)
@_debug_option
def keygen(name: Path) -> None:
    """Make an Ed25519 key pair to sign bundles with (export --sign NAME.key).

    Keep NAME.key to yourself; hand NAME.pub to whoever checks your bundles
    (verify --bundle FILE --trust NAME.pub).

    \b
    Example:
        freezeframe keygen -o team
    """
    private, public = exchange_formats.keygen(name)
    click.echo(f"wrote {private} (keep it secret) and {public}")


@contextlib.contextmanager
def _progress(what: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal (stderr), nothing in a pipe."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.advance(task, n)


@main.command()
@click.argument("cassette")
@_store_options
@_RULES
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@_JSON
@_debug_option
def rekey(cassette: str, rules: str | None, dry_run: bool, as_json: bool) -> None:
    """Recompute every key under the current rules; report collisions and splits.

    A collision is recordings that had different keys and now share one (replay serves
    them in recorded order); a split is recordings that shared a key and now differ. The
    chain is checked first and re-computed after. Stop any proxy recording into the
    cassette first: it counts occurrences in memory.

    \b
    Example:
        freezeframe rekey bug-8821 --rules rules.toml --dry-run
    """
    from rich.console import Console

    from freezeframe.proxy.keys import rules_config
    from freezeframe.whatif.rekey import rekey as rekey_cassette
    from freezeframe.whatif.rekey import report_lines

    validate_cassette_name(cassette)
    config = rules_config(rules, _located().data_dir)
    with _open() as opened:
        report = rekey_cassette(opened, cassette, config, dry_run=dry_run)
    if as_json:
        _emit_json(asdict(report))
        return
    console = Console()
    for line in report_lines(report):
        console.print(line, highlight=False)


@main.group()
def rules() -> None:
    """Key rules learned from the recordings.

    \b
    Example:
        freezeframe rules suggest bug-8821 --apply
    """


@rules.command(name="suggest")
@click.argument("cassette")
@_store_options
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml]", "rules_file", metavar="FILE"
)
@click.option(
    "--apply",
    is_flag=True,
    help="Add the suggested rules to the rules file, after showing what rekey would change.",
)
@_JSON
@_debug_option
def suggest(cassette: str, rules_file: str | None, apply: bool, as_json: bool) -> None:
    """Suggest key rules from recordings of the same call that differ in volatile places.

    Each suggestion names its evidence: the exchanges, the path and the values. The
    conversation itself (messages, input, contents, system...) is never suggested.

    \b
    Example:
        freezeframe rules suggest bug-8821
        freezeframe rules suggest bug-8821 --apply
    """
    from freezeframe.proxy.keys import RULES_FILENAME, key_config_of
    from freezeframe.whatif import suggest as suggesting

    validate_cassette_name(cassette)
    path = _located().data_dir / RULES_FILENAME
    if rules_file:
        path = Path(rules_file).expanduser()
    with _open() as opened:
        found = suggesting.suggestions_of(opened, cassette)
        planned = None
        if apply and found:
            current = path.read_text(encoding="utf-8") if path.is_file() else ""
            planned = suggesting.preview(opened, cassette, found, current, str(path), key_config_of)
    if not as_json:
        _echo(suggesting.suggestion_lines(cassette, found, planned))
    if planned is not None:
        suggesting.write_rules(path, planned)
        _note(f"added {len(found)} rules to {path}; run `freezeframe rekey {cassette}` to re-key")
    if as_json:
        document: dict[str, Any] = {"suggestions": [s.document() for s in found]}
        if planned is not None:
            document["applied"] = suggesting.applied_document(path, planned)
        _emit_json(document)


@main.command()
@click.argument("query")
@click.option("--cassette", default=None, help="Only in this cassette.")
@click.option("--limit", default=50, show_default=True, help="At most this many exchanges.")
@_store_options
@_JSON
@_debug_option
def search(query: str, cassette: str | None, limit: int, as_json: bool) -> None:
    """Find the exchanges whose bodies or metadata hold QUERY, newest first.

    QUERY is one phrase: its words in order, any case, within one value (a JSON string or
    number, a streamed answer's text, a model name, an id, a URL's query value).

    \b
    Example:
        freezeframe search ord_8821
        freezeframe search gpt-4o-2024-08-06 --cassette bug-8821 --json
    """
    if cassette is not None:
        validate_cassette_name(cassette)
    with _open() as opened:
        hits = opened.search(query, cassette, limit)
        noted = opened.search_notes(query, cassette, limit)
    if as_json:
        from freezeframe.evidence.document import search_document
        from freezeframe.evidence.notes import note_hit

        _emit_json([search_document(hit) for hit in hits] + [note_hit(n) for n in noted])
        return
    from freezeframe.evidence import listings

    _echo(listings.search_lines(query, cassette, hits, noted))
    if hits:
        _console().print(listings.search_table(hits))


@main.command()
@click.argument("source")
@click.argument("target")
@click.option("--upto", type=int, default=None, metavar="SEQ", help="Copy exchanges 0 to SEQ only.")
@_store_options
@_JSON
@_debug_option
def fork(source: str, target: str, upto: int | None, as_json: bool) -> None:
    """Make cassette TARGET from SOURCE's exchanges, sharing their bodies; SOURCE never changes.

    TARGET's chain starts from its provenance (SOURCE, the last seq copied, SOURCE's chain
    head), so `freezeframe verify TARGET` proves what it was forked from.

    \b
    Example:
        freezeframe fork bug-8821 bug-8821-upto5 --upto 5
    """
    validate_cassette_name(source)
    validate_cassette_name(target)
    with _open() as opened:
        forked = opened.fork(source, target, upto=upto)
    if as_json:
        _emit_json(asdict(forked))
        return
    copied = "every exchange" if upto is None else f"exchanges 0 to {upto}"
    click.echo(
        f"forked {source!r} into {target!r}: {forked.exchanges} exchanges ({copied}), "
        f"chain head {forked.head}"
    )


@main.command()
@click.argument("cassette")
@click.argument("seq", type=int)
@click.option("--into", "target", required=True, metavar="NAME", help="The fork to write.")
@click.option(
    "--response-body", type=click.File("rb"), default=None, help="The new body ('-': stdin)."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="JSONPATH=JSON",
    help="Put a JSON value at a path of the answer (repeatable).",
)
@click.option("--status", type=int, default=None, help="The new HTTP status.")
@click.option(
    "--header", "headers", multiple=True, metavar="'K: V'", help="Set a header (repeatable)."
)
@_store_options
@_RULES
@_JSON
@_debug_option
def edit(
    cassette: str,
    seq: int,
    target: str,
    response_body: Any,
    sets: tuple[str, ...],
    status: int | None,
    headers: tuple[str, ...],
    rules: str | None,
    as_json: bool,
) -> None:
    """Fork CASSETTE into NAME with the answer of exchange SEQ changed; CASSETTE never changes.

    The edited exchange keeps the original's chain value beside its own, with a line per
    change, which `show` and the case file print. Replay NAME to see what the agent does
    with the answer it should have had.

    \b
    Example:
        freezeframe edit bug-8821 3 --into bug-8821-fix1 \\
            --set '$.orders=[{"id": "ord_8821", "user": "u-17"}]'
    """
    from freezeframe.evidence.triage import sign_cassette
    from freezeframe.proxy.keys import rules_config
    from freezeframe.whatif.editing import AnswerEdit, Assignment, edited, header_pair

    validate_cassette_name(cassette)
    validate_cassette_name(target)
    with _usage():
        assignments = tuple(Assignment.parse(text) for text in sets)
        pairs = tuple(header_pair(text) for text in headers)
    change = AnswerEdit(
        body=response_body.read() if response_body is not None else None,
        sets=assignments,
        status=status,
        headers=pairs,
        source=getattr(response_body, "name", "a file"),
    )
    config = rules_config(rules, _located().data_dir)
    with _open() as opened:
        made = edited(opened.exchange(cassette, seq), change, config)
        forked = opened.fork(cassette, target, edits={seq: made})
        sign_cassette(opened, target)
    if as_json:
        _emit_json(asdict(forked) | {"seq": seq, "changes": list(made.changes)})
        return
    click.echo(f"forked {cassette!r} into {target!r} with #{seq} edited:")
    for line in made.changes:
        _say(f"  {line}")


@main.command()
@click.argument("cassette")
@click.argument("seq", type=int)
@click.option("--into", "target", required=True, metavar="NAME", help="Record the new answer here.")
@click.option(
    "--set", "sets", multiple=True, metavar="JSONPATH=JSON", help="Change the JSON request first."
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'K: V'",
    help="Set a header, e.g. the API key the recording never stored (repeatable).",
)
@click.option(
    "--fork",
    "as_fork",
    is_flag=True,
    help="Make NAME a fork of CASSETTE with the new answer in SEQ's place.",
)
@_store_options
@_RULES
@_setting(
    "--upstream-ca",
    "Extra CA (PEM) trusted for the upstream, on top of the system's.",
    metavar="FILE",
)
@_setting("--upstream-proxy", "Send through this proxy: http(s)://host:port.", metavar="URL")
@_JSON
@_debug_option
def resend(
    cassette: str,
    seq: int,
    target: str,
    sets: tuple[str, ...],
    headers: tuple[str, ...],
    as_fork: bool,
    rules: str | None,
    upstream_ca: str | None,
    upstream_proxy: str | None,
    as_json: bool,
) -> None:
    """Send exchange SEQ's request upstream again, record the answer into NAME, and print
    how it differs from the recorded one.

    Secrets were never stored: give the API key again with --header. With --fork, NAME
    replays the whole run around the new answer; the new ids of an OpenAI Responses answer
    are printed beside the recorded ones they stand for, and map back on replay.

    \b
    Example:
        freezeframe resend bug-8821 2 --into bug-8821-newmodel \\
            --set '$.model="gpt-4o-2026-01-01"' --header "Authorization: Bearer $OPENAI_API_KEY"
    """
    from freezeframe.proxy.keys import redactor_in, rules_config
    from freezeframe.proxy.trust import upstream_verify
    from freezeframe.whatif.editing import Assignment, header_pair
    from freezeframe.whatif.resend import resend as resend_exchange
    from freezeframe.whatif.resend import resent_lines

    validate_cassette_name(cassette)
    validate_cassette_name(target)
    directory = _located().data_dir
    verify = upstream_verify(directory, upstream_ca)
    proxy = settings_module.UpstreamProxy.parse(upstream_proxy) if upstream_proxy else None
    with _usage():
        assignments = [Assignment.parse(text) for text in sets]
        pairs = [header_pair(text) for text in headers]
    with _open() as opened:
        resent = resend_exchange(
            opened,
            opened.exchange(cassette, seq),
            target,
            sets=assignments,
            headers=pairs,
            redactor=redactor_in(directory),
            config=rules_config(rules, directory),
            verify=verify,
            proxy=proxy.with_credentials() if proxy else None,
            fork=as_fork,
        )
    if as_json:
        _emit_json(asdict(resent))
        return
    _echo(resent_lines(cassette, seq, resent))


@main.command(name="diff")
@click.argument("a")
@click.argument("b")
@_store_options
@_JSON
@click.option(
    "--strict", is_flag=True, help="Compare the ids a model makes up byte for byte, not by role."
)
@_debug_option
def diff_runs(a: str, b: str, as_json: bool, strict: bool) -> None:
    """Compare two runs step by step; exit 0 when they are equivalent, 1 when they differ.

    A and B are cassettes, or CASSETTE@RUN_ID for the exchanges of one run. Model calls
    are aligned by position, tool calls by what they called; for each step the request's
    differing JSON paths, the answer's differences (text, tool calls chosen, finish reason;
    a tool's status and body) and, apart, what does not change behaviour (model snapshot,
    system_fingerprint, usage, timing). The first step where they diverge is named.
    Ids the model makes up each call (chatcmpl-, call_ and the tool_call_id echoing it,
    resp_, msg_, toolu_) count by their role, so a faithful re-run is equivalent; --strict
    compares them byte for byte.

    \b
    Example:
        freezeframe diff orders-bug orders-careful
        freezeframe diff bug-8821@run-1 bug-8821@run-2 --json
    """
    from freezeframe.evidence.compare import compare_runs, diff_document, read_run
    from freezeframe.evidence.listings import diff_lines

    with _open() as opened:
        compared = compare_runs(a, read_run(opened, a), b, read_run(opened, b), strict=strict)
    if as_json:
        _emit_json(diff_document(compared))
    else:
        _echo(diff_lines(compared))
    sys.exit(0 if compared.equivalent else 1)


@main.command(name="rm")
@click.argument("cassette")
@_store_options
@click.option("--yes", is_flag=True, help="Do not ask; needed when not on a terminal.")
@_JSON
@_debug_option
def rm(cassette: str, yes: bool, as_json: bool) -> None:
    """Remove a cassette: its exchanges, drift notes, and the bodies no other cassette uses.

    Asks first on a terminal; elsewhere, --yes is required. Stop any proxy recording
    into the cassette first: it counts positions in memory. To record a cassette again
    from scratch in one step, start the proxy with --fresh instead.

    \b
    Example:
        freezeframe rm bug-8812 --yes
    """
    from freezeframe.evidence.words import plural, size

    validate_cassette_name(cassette)
    with _open() as opened:
        if not yes:
            asked = f"cassette {cassette!r} ({plural(len(opened.exchanges(cassette)), 'exchange')})"
            if not sys.stdin.isatty():
                raise ValueError(
                    f"rm would remove {asked}; pass --yes to do it without a terminal to ask on"
                )
            click.confirm(f"remove {asked}?", abort=True)
        removed = opened.remove(cassette)
    if as_json:
        _emit_json(asdict(removed))
        return
    click.echo(
        f"removed cassette {cassette!r}: {plural(removed.exchanges, 'exchange')}, "
        f"{plural(removed.bodies, 'body')} ({size(removed.freed)}) that no other cassette used"
    )


@main.command()
@_store_options
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@click.option(
    "--grace",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="Leave bodies stored more recently than this (an exchange may still name them).",
)
@_JSON
@_debug_option
def gc(dry_run: bool, grace: str, as_json: bool) -> None:
    """Remove the bodies and search values no cassette uses, and say what that freed.

    Bodies a cassette no longer uses are left by failed imports, exchanges that were never
    written, and stores from before schema 5 (rm and edits remove theirs at once). Safe
    while proxies record into the store.

    \b
    Example:
        freezeframe gc --dry-run
    """
    from freezeframe.evidence.words import size

    with _usage():
        seconds = settings_module.parse_duration(grace, "--grace")
    with _open() as opened:
        found = opened.collect(seconds, dry_run=dry_run)
    if as_json:
        _emit_json(asdict(found) | {"dry_run": dry_run})
        return
    verb = "would remove" if dry_run else "removed"
    objects = f", and {found.objects} objects in object storage" if found.objects else ""
    click.echo(
        f"{verb} {found.bodies} bodies no cassette uses ({size(found.freed)}) "
        f"and {found.values} search values{objects}"
    )


@main.group()
def blobs() -> None:
    """Bodies in object storage (--blobs s3://BUCKET[/PREFIX]): move them there and back.

    \b
    Example:
        freezeframe blobs move --to s3://traffic/freezeframe
    """


@blobs.command("move")
@_store_options
@click.option(
    "--to",
    "target",
    required=True,
    metavar="s3://BUCKET[/PREFIX]|sql",
    help="Where the bodies go: an object store, or back into the SQL store (sql).",
)
@_debug_option
def blobs_move(target: str) -> None:
    """Move a store's bodies into object storage, or back into the SQL store.

    One body at a time, so proxies may keep recording meanwhile, and a move stopped half
    way can be run again. Run proxies with --blobs set to the same URL from then on.

    \b
    Example:
        freezeframe blobs move --to s3://traffic/freezeframe
        freezeframe blobs move --to sql --blobs s3://traffic/freezeframe
    """
    with _open() as opened:
        moved = opened.move_bodies(target)
    where = "the SQL store" if target == "sql" else target
    click.echo(f"moved {moved} bodies into {where}")


@main.command()
@_store_options
@click.option("--no-browser", is_flag=True, help="Print the case file's URL; open no browser.")
@_debug_option
def demo(no_browser: bool) -> None:
    """Record an agent, then replay it with its model and tool stopped: no API key needed.

    No API key, no network: the model (streamed chat completions with a tool call, over
    HTTPS) and the tool run here, and the agent is plain httpx through `freezeframe run`.
    Prints both runs and whether replay was identical; leaves the cassette `demo` for ls,
    show and the case file, which it serves until Ctrl-C on a terminal (opening a browser
    where there is one).

    \b
    Example:
        freezeframe demo
        freezeframe show demo
    """
    from freezeframe.proxy.demo import present, run_demo

    place = _located()
    outcome = run_demo(
        place.data_dir,
        _meta("store"),
        _say,
        lambda replayer, done: present(replayer, done, place.url, not no_browser, click.echo),
    )
    sys.exit(0 if outcome.identical else 1)


@main.command(name="replay-reset")
@_setting("--admin", "Admin API of the running proxy.", default=settings_module.DEFAULT_ADMIN)
@_ADMIN_TOKEN
@_debug_option
def replay_reset(admin: str, admin_token: str | None) -> None:
    """Tell a running proxy to start replay from the top (POST /api/replay/reset).

    Replay serves the n-th request with a key the n-th recording of it; running the
    agent again against the same proxy needs the count to start over.

    \b
    Example:
        freezeframe replay-reset --admin 127.0.0.1:8081
    """
    from freezeframe.proxy.discovery import reset_replay

    mode = reset_replay(admin, admin_token)
    click.echo(f"replay starts from the top (mode {mode['mode']}, cassette {mode['cassette']!r})")


@main.command()
@click.option(
    "--since", metavar="DURATION", help="Only failures of the last DURATION (30m, 6h, 2d)."
)
@click.option("--cassette", "pattern", metavar="GLOB", help="Only cassettes whose name matches.")
@click.option("--kind", type=click.Choice(FAILURE_KINDS), help="Only failures of this kind.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="First work out the signatures of exchanges stored before triage or under older rules.",
)
@_store_options
@_JSON
@_debug_option
def triage(
    since: str | None, pattern: str | None, kind: str | None, rebuild: bool, as_json: bool
) -> None:
    """The failing runs, grouped by what went wrong, largest group first.

    A run is a cassette, or CASSETTE@RUN_ID where the traffic carried a run id. Each group
    is one signature (the kind, the endpoint, the status, the error with its ids and numbers
    masked), with its runs and its first failure to open. A healthy run is in no group.

    \b
    Example:
        freezeframe triage --since 24h
        freezeframe triage --cassette 'prod-*' --kind provider_error --json
    """
    from freezeframe.evidence import listings
    from freezeframe.evidence import triage as triaging

    window = None if since is None else triaging.parse_duration(since)
    with _open() as opened:
        if rebuild:
            unsigned = triaging.pending_count(opened)
            cassettes = triaging.stale_cassettes(opened)
            with _progress("signing", sum(cassettes.values())) as advance:
                rebuilt = triaging.rebuild(opened, advance)
            click.echo(listings.rebuilt_line(unsigned, rebuilt, len(cassettes)), err=True)
        found = triaging.find_groups(opened, since=window, pattern=pattern, kind=kind)
        numbered = triaging.numbers(opened)
        stale = 0 if rebuild else triaging.pending_count(opened)
    if stale:
        click.echo(listings.unsigned_line(stale), err=True)
    if as_json:
        _emit_json(triaging.triage_document(found, numbered=numbered))
    elif not found:
        click.echo("no failures found")
    else:
        console = _console()
        width = max(console.width, 40) if console.is_terminal else None  # piped: whole lines
        _echo(listings.groups_lines(found, numbered, width))


@main.command()
@click.argument("target", metavar="CASSETTE[:SEQ]")
@click.argument("text")
@_store_options
@_debug_option
def note(target: str, text: str) -> None:
    """Keep a case note on a cassette, or on one of its exchanges (CASSETTE:SEQ).

    A ticket, a verdict, a lead: shown by `show` and in the case file, found by `search`,
    carried by export and import.

    \b
    Example:
        freezeframe note bug-8821 "TICKET-412: customer saw a refund twice"
        freezeframe note bug-8821:7 "cold case: missing tool schema version"
    """
    from freezeframe.evidence.notes import note_target

    cassette, seq = note_target(target)
    validate_cassette_name(cassette)
    if not text.strip():
        raise ValueError("a note needs some text")
    with _open() as opened:
        opened.add_note(Note(cassette, seq, time.time(), text))
    click.echo(f"noted on {cassette}" + ("" if seq is None else f" exchange {seq}"))


@main.command()
@click.argument("group", metavar="GROUP")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_store_options
@_setting("--listen", "Proxy listen address for each run.", default="127.0.0.1:8080")
@_setting("--admin", "Admin API + web UI address for each run.", default="127.0.0.1:8081")
@_setting(
    "--isolate/--no-isolate",
    "Run COMMAND where only the proxy is reachable  [default: on where the system allows it]",
    envvar="FREEZEFRAME_ISOLATE",
    default=None,
)
@click.option(
    "--live",
    is_flag=True,
    help="Send the run's model calls upstream for real (credentials from the environment); "
    "every other call is answered from the run's recording.",
)
@click.option(
    "--tries",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="With --live: how many times each run is tried.",
)
@click.option(
    "--max-live-calls",
    type=click.IntRange(0),
    default=None,
    help="With --live: refuse when the estimate is above this many live model calls, and "
    "start no try that would pass it.",
)
@click.option(
    "--budget",
    type=click.FloatRange(0),
    default=None,
    metavar="USD",
    help="With --live: refuse when the estimated cost is above this many US dollars, and "
    "start no try that would pass it.",
)
@click.option(
    "--model-url",
    default=None,
    metavar="URL",
    help="With --live: send the model calls to this http[s]://HOST[:PORT] instead of the "
    "upstream the run recorded.",
)
@_setting("--upstream-ca", "With --live: a PEM CA bundle the model's certificate may chain to.")
@_JSON
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show COMMAND's output and each run's proxy log here, not only in a log file.",
)
@_debug_option
def recheck(
    group: str,
    command: tuple[str, ...],
    listen: str,
    admin: str,
    isolate: bool | None,
    live: bool,
    tries: int,
    max_live_calls: int | None,
    budget: float | None,
    model_url: str | None,
    upstream_ca: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Run COMMAND once per run of a failure group, each in replay against that run.

    GROUP is the group's number as `triage` lists it, its signature, or the start of
    exactly one signature. A run passes when COMMAND exits 0 and replay missed nothing;
    each run is one line, COMMAND's output and the proxies' logs go to a log file (-v shows
    them). Exit 0 when every run passes (the group collapses), 1 when any fails. With --live,
    model calls go upstream and each run is tried --tries times: verdict fixed, flaky,
    still_failing or diverged, with the flip rate and its 95% interval; the estimated cost
    is shown before anything is spent. Put `--` before the command.

    \b
    Example:
        freezeframe recheck 1 -- python agent.py
        freezeframe recheck 'provider_error POST api.openai.com/v1/chat/completions 429' \\
            -- python agent.py
        freezeframe recheck 3 --live --tries 10 --budget 0.50 -- python agent.py
    """
    from freezeframe.evidence.triage import find_group
    from freezeframe.sandbox import recheck as rechecking
    from freezeframe.sandbox.aside import details_file
    from freezeframe.sandbox.command import Confinement

    live_only = (max_live_calls, budget, model_url)
    if not live and (tries != 5 or any(given is not None for given in live_only)):
        raise click.UsageError("--tries, --max-live-calls, --budget and --model-url go with --live")
    _configure_logging(_debug())
    settings = settings_module.build(
        mode="replay",
        cassette="default",
        data_dir=_meta("data_dir"),
        store=_meta("store"),
        listen=listen,
        admin=admin,
        upstream_ca=upstream_ca,
        blobs=_given_blobs(),
        replay_pace="instant",
        miss_details=True,
    )
    confinement = Confinement(isolate=isolate)
    with _open() as opened:
        found = find_group(opened, group)
        aside = None if as_json or verbose else details_file("recheck")
        limits = None
        if live:
            url = None if model_url is None else settings_module.parse_model_url(model_url)
            limits = rechecking.Live(tries, max_live_calls, budget, url)
            planned = rechecking.estimate(opened, found, tries)
            _note(planned.line())
            refusal = planned.refusal(limits)
            if refusal is not None:
                _fail(refusal)
        report = rechecking.recheck_group(
            opened,
            found,
            command,
            settings,
            confinement,
            limits,
            quiet=as_json,
            aside=aside,
            say=_say,
        )
        if aside is not None:
            _note(f"COMMAND's output and the proxies' logs: {aside} (-v shows them here)")
    if as_json:
        _emit_json(rechecking.report_document(report))
    else:
        click.echo(rechecking.summary_line(report))
    if isinstance(report, rechecking.LiveRecheck) and report.stopped:
        untried = f"; not tried: {', '.join(report.untried)}" if report.untried else ""
        _note(f"stopped early: {report.stopped}{untried}")
    sys.exit(0 if report.collapsed else 1)
