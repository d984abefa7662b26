"""The ``freezeframe`` command line.

Each command resolves settings (flag > environment variable > default), calls one
library function, and renders the result: a rich table for people, one JSON document
on stdout for machines (``--json``). Errors are one line on stderr with a non-zero exit;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from freezeframe import exchange_formats
from freezeframe.evidence.inert import inert
from freezeframe.proxy import settings as settings_module
from freezeframe.storage import (
    CassetteNotFound,
    ExchangeFilter,
    ExchangeSummary,
    Note,
    Store,
    StoreError,
    StoreNotFound,
)
from freezeframe.storage.names import InvalidCassetteName, closest_names, validate_cassette_name

if TYPE_CHECKING:
    from rich.console import Console

    from freezeframe.evidence.compare import RunDiff
    from freezeframe.proxy.discovery import Trust
    from freezeframe.sandbox.clock import FakedClock
    from freezeframe.sandbox.command import Confinement, Run
    from freezeframe.storage import ExchangeSummary

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
            _fail(str(exc) + _suggestion(ctx, exc))

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


def _suggestion(ctx: click.Context, exc: Exception) -> str:
    """For a cassette the store does not hold, the names it does hold that are closest
    (``show orderz``: did you mean 'orders'?), as the proxy says at start."""
    located = ctx.meta.get("freezeframe.located")
    if not isinstance(exc, CassetteNotFound) or located is None:
        return ""
    from freezeframe.storage import open_store

    local = ctx.meta.get("freezeframe.local")
    elsewhere = _local_store(local, located[1]) if local is not None else None
    try:
        if elsewhere is not None:
            with open_store(elsewhere, create=False) as store:
                if store.has_cassette(exc.cassette):
                    return (
                        f", the running proxy's; {local}/ here holds {exc.cassette!r}: "
                        f"pass --data-dir {local} to read that store"
                    )
        with open_store(located[1], create=False) as store:
            close = closest_names(exc.cassette, store.cassette_names())
    except StoreError:
        return ""
    return f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""


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


def _blobs(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Keep --blobs (or FREEZEFRAME_BLOBS) where every store this command opens finds it
    (_given_blobs), so that no command needs a parameter of its own for it."""
    ctx.meta["freezeframe.blobs"] = value or None


def _given_blobs() -> str | None:
    """The object store the command was given for bodies (--blobs); None: none."""
    blobs = click.get_current_context().meta.get("freezeframe.blobs")
    return blobs if isinstance(blobs, str) else None


def _store_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = _setting(
        "--blobs",
        "Object store for bodies: s3://BUCKET[/PREFIX] (endpoint and credentials from AWS_*).",
        metavar="URL",
        expose_value=False,
        callback=_blobs,
    )(f)
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
    """The store a command reads, where _located finds it, which must exist: a mistyped
    --data-dir says so instead of creating an empty store and listing nothing. Use it as a
    context manager (proxy.settings.open_existing): it closes however the command ends."""
    _, url = _located(data_dir, store)
    return settings_module.open_existing(data_dir, url, _given_blobs())


def _located(data_dir: str, store: str | None) -> tuple[Path, str]:
    """The data dir and store URL a command uses: those given (flag or variable); else the
    running proxy's, when one answers at FREEZEFRAME_ADMIN, said on stderr (run from the
    agent's directory, the default ./.freezeframe is another store, or none); else the
    default data dir's."""
    context = click.get_current_context()
    if "freezeframe.located" in context.meta:
        return context.meta["freezeframe.located"]  # type: ignore[no-any-return]
    directory = Path(data_dir).expanduser()
    located = (directory, store or settings_module.default_store_url(directory))
    if not (_explicit("data_dir") or _explicit("store")):
        from freezeframe.proxy.discovery import store_of_running

        admin = os.environ.get("FREEZEFRAME_ADMIN") or settings_module.DEFAULT_ADMIN
        address = settings_module.Address.parse(admin, "FREEZEFRAME_ADMIN")
        found = store_of_running(address, os.environ.get("FREEZEFRAME_ADMIN_TOKEN"))
        if found is not None:
            if _local_store(directory, found.url) is not None:  # two stores: say which is read
                _note(f"reading the store of the proxy at {found.admin}: {found.url}")
            context.meta["freezeframe.local"] = directory
            located = (found.data_dir, found.url)
    context.meta["freezeframe.located"] = located
    return located


def _local_store(directory: Path, other: str) -> str | None:
    """The URL of the store in ``directory`` (the default ./.freezeframe) when it exists and
    is not ``other``, the running proxy's: only then is which one a command reads news."""
    path = directory / settings_module.DB_FILENAME
    url = settings_module.default_store_url(directory)
    if not path.is_file() or url == other or path.resolve() == _sqlite_path(other):
        return None
    return url


def _sqlite_path(url: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(url[len(prefix) :]).resolve() if url.startswith(prefix) else None


def _note(message: str) -> None:
    """One line on stderr that is not an error; stdout stays the command's output."""
    click.echo(f"freezeframe: {inert(message, newlines=False)}", err=True)


def _explicit(name: str) -> bool:
    """Whether the user set option ``name`` (flag or variable) rather than its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


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
        freezeframe run --mode record --cassette bug-8821 &
        eval "$(freezeframe env --wait 30)"
        python agent.py
    """


def _run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The settings of a proxy, shared by ``run`` and ``exec``."""
    for option in reversed(_RUN_OPTIONS):
        f = option(f)
    return _store_options(f)


def _mode(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A mode that is not one is a usage error (exit 2), as a misspelt flag is."""
    from freezeframe.addons.state import Mode

    try:
        Mode.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None
    return value


_RUN_OPTIONS = [
    _setting("--mode", "record, replay, auto or passthrough.", default="record", callback=_mode),
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
        "--admin-token",
        "Secret the admin API and case file ask for (bearer header, login form); required "
        "when --admin is not a loopback address. Prefer the variable: flags show in ps.",
        metavar="TOKEN",
    ),
    _setting(
        "--admin-host",
        "Another name the admin port answers to in the Host header, beside its address and "
        "localhost (repeatable; env: comma-separated).",
        "admin_hosts",
        envvar="FREEZEFRAME_ADMIN_HOSTS",
        multiple=True,
        metavar="NAME",
        type=_Separated(","),
    ),
    _setting(
        "--admin-trusted-proxy",
        "A reverse proxy (address or CIDR) in front of the admin port whose X-Forwarded-For "
        "is believed; from anyone else it is ignored (repeatable; env: comma-separated).",
        "admin_trusted_proxies",
        envvar="FREEZEFRAME_ADMIN_TRUSTED_PROXIES",
        multiple=True,
        metavar="ADDR",
        type=_Separated(","),
    ),
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
    _setting(
        "--miss-details/--no-miss-details",
        "Quote the nearest recording's differing values in miss answers  "
        "[default: off for run; on for exec, whose proxy serves one run]",
        envvar="FREEZEFRAME_MISS_DETAILS",
        default=None,
    ),
    _setting(
        "--fresh",
        "Empty the cassette before recording into it (record and auto modes).",
        is_flag=True,
        default=False,
    ),
    _setting(
        "--live",
        "In replay, send these requests upstream for real (repeatable; env: comma-separated).",
        multiple=True,
        metavar="HOST[/PATH-GLOB]",
        type=_Separated(","),
    ),
    _setting(
        "--record-into",
        "In replay, record the new run (live answers, and replayed ones marked so) here.",
        metavar="NAME",
    ),
    _setting(
        "--after-miss",
        "miss, or live: --live routes replay until the run first misses, then go upstream.",
        default="miss",
    ),
    _setting(
        "--durability",
        "batched, or strict: an answer's end reaches the client once its exchange is stored.",
        default="batched",
    ),
    _setting(
        "--store-writer",
        "process, or thread: where the store's commits, compression and indexing run.",
        default="process",
    ),
    _setting(
        "--max-age",
        "Remove cassettes with no exchange newer than this (30d, 12h), at start and hourly.",
        metavar="DURATION",
    ),
    _setting(
        "--perturb",
        "In replay, perturb recorded answers: KIND[=ARG][@HOST[/PATH-GLOB]][:P],… "
        "(docs/ci.md, Fuzzing around the fixture).",
        metavar="SPEC",
    ),
    _setting(
        "--seed",
        "Seed of --perturb's rolls  [default: drawn at start and logged]",
        metavar="N",
    ),
    _setting(
        "--replay-session",
        "Count replay positions in the store under NAME, shared by replicas replaying together.",
        metavar="NAME",
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
    import asyncio
    import gc

    gc.disable()  # until the proxy serves: proxy.serve.serve_process says why
    from freezeframe.storage.sql import writerprocess

    settings = settings_module.build(**options, blobs=_given_blobs())
    if settings.store_writer == "process":
        writerprocess.start_early()  # it imports the store while this process imports the proxy
    try:
        from freezeframe.proxy.serve import serve_process

        _configure_logging(click.get_current_context().meta.get("freezeframe.debug", False))
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

    from freezeframe.sandbox.command import Confinement, run_command

    _configure_logging(click.get_current_context().meta.get("freezeframe.debug", False))
    confinement = Confinement(capture=capture, isolate=isolate)
    faked = _faked_clock(clock, options) if clock else None
    if options["miss_details"] is None:
        options["miss_details"] = True  # the proxy exec starts answers its one run alone
    if runs > 1 or as_json:
        if proxy_url is not None:
            raise click.UsageError("--runs starts a proxy for each run: drop --proxy")
        if strict:
            raise click.UsageError("--strict checks one run: drop --runs and --json")
        settings = settings_module.build(**options, blobs=_given_blobs())
        sys.exit(_repeat(command, settings, runs, confinement, faked, as_json))
    if proxy_url is None:
        from freezeframe.sandbox.strict import run_with_tape

        settings = settings_module.build(**options, blobs=_given_blobs())
        status, tapes, drifted = asyncio.run(run_with_tape(command, settings, confinement, faked))
        for line in drifted:
            _note(line)
        for tape in tapes:
            for line in tape.lines(strict):
                _note(line)
        if status == 0 and any(tape.failed(strict) for tape in tapes):
            _fail("--strict: the run left the tape as listed above")
        sys.exit(status)
    if strict:
        raise click.UsageError("--strict reads the journal of the proxy exec starts: drop --proxy")
    explicit = Path(options["data_dir"]).expanduser() if _explicit("data_dir") else None

    def trust_of() -> Trust:
        assert proxy_url is not None
        return _trust_of_proxy(proxy_url, options["admin"], explicit, options["admin_token"])

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


def _repeat(
    command: Sequence[str],
    settings: settings_module.Settings,
    runs: int,
    confinement: Confinement,
    clock: FakedClock | None,
    as_json: bool,
) -> int:
    """``exec --runs``: 0 when every run exited 0, else 1. With ``--json`` the command's
    output goes to stderr, so that stdout is the one JSON document."""
    import asyncio

    from freezeframe.sandbox.command import run_repeatedly

    stdout = os.dup(1) if as_json else None
    if stdout is not None:
        sys.stdout.flush()
        os.dup2(2, 1)
    try:
        done = asyncio.run(
            run_repeatedly(command, settings, runs, confinement=confinement, clock=clock)
        )
    finally:
        if stdout is not None:
            os.dup2(stdout, 1)
            os.close(stdout)
    if as_json:
        _emit_json({"runs": [run.document() for run in done]})
    else:
        _print_runs(done)
    return 0 if all(run.status == 0 for run in done) else 1


def _print_runs(done: Sequence[Run]) -> None:
    """Each run's perturbations and exit status, then each perturbation's exit statuses."""
    from collections import Counter

    from rich.table import Table

    console = _console()
    table = Table("run", "seed", "exit", "perturbed", title="exec --runs", title_justify="left")
    by_kind: dict[str, Counter[int]] = {}
    for run in done:
        lines = [f"{event.perturbed}: {event.method} {event.url}" for event in run.perturbed]
        cells = "\n".join(_cell(line) for line in lines)
        table.add_row(str(run.number), str(run.seed), str(run.status), cells)
        kinds = {str(event.perturbed).split()[0] for event in run.perturbed} or {"(none)"}
        for kind in kinds:
            by_kind.setdefault(kind, Counter())[run.status] += 1
    console.print(table)
    summary = Table("perturbation", "runs", "exit statuses", title="by perturbation")
    for kind, statuses in sorted(by_kind.items()):
        counted = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
        summary.add_row(_cell(kind), str(sum(statuses.values())), counted)
    console.print(summary)


def _faked_clock(value: str, options: dict[str, Any]) -> FakedClock:
    """``--clock``: refused in one line without libfaketime, or without a time to start at."""
    from freezeframe.sandbox.clock import Clock, FakedClock, library

    wanted = Clock.parse(value)
    lib = library()
    if wanted.moment is not None:
        return FakedClock(wanted.moment, lib)
    with _open(options["data_dir"], options["store"]) as store:
        return FakedClock(wanted.start(store, options["cassette"]), lib)


def _trust_of_proxy(url: str, admin: str, data_dir: Path | None, token: str | None) -> Trust:
    """``exec --proxy URL``: the CA of the proxy at URL, asked of its admin API; an explicit
    ``data_dir`` wins, for a proxy whose files are mounted somewhere else."""
    from urllib.parse import urlsplit

    from freezeframe.proxy.discovery import (
        NoProxyFound,
        admin_url,
        proxy_url,
        running,
        trust_in,
        trust_of_running,
    )

    if data_dir is not None:
        return trust_in(data_dir)
    address = settings_module.Address.parse(admin, "admin address")
    document = running(address, token)
    wanted = urlsplit(url if "://" in url else f"http://{url}")
    found = urlsplit(proxy_url(document))
    if (wanted.hostname, wanted.port) != (found.hostname, found.port):
        raise NoProxyFound(
            f"the freezeframe at {admin_url(address)} proxies on {proxy_url(document)}, "
            f"not {url}; pass that proxy's --admin, or --data-dir"
        )
    return trust_of_running(document, address)


_ADMIN_TOKEN = _setting(
    "--admin-token",
    "The running proxy's admin token, if it has one (prefer the variable: flags show in ps).",
    metavar="TOKEN",
)
"""How ``env``, ``ca`` and ``replay-reset`` prove themselves to a proxy with a token."""


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
    from freezeframe.proxy.discovery import proxy_url, trust_in, trust_of_running, wait_running
    from freezeframe.proxy.trust import java_truststore
    from freezeframe.sandbox.wiring import client_environment, render

    address = settings_module.Address.parse(admin, "admin address")
    document = wait_running(address, admin_token, wait)
    if _explicit("data_dir"):
        trust = trust_in(Path(data_dir).expanduser())
    else:
        trust = trust_of_running(document, address)
    environment = client_environment(
        proxy_url(document), trust.ca, trust.bundle, java_truststore(trust.ca, trust.bundle)
    )
    click.echo(render(environment, shell), nl=False)


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
    with _open(data_dir, store) as opened:
        rows = opened.cassettes(where)
    if as_json:
        from freezeframe.evidence.document import cassette_document

        _emit_json([cassette_document(row) for row in rows])
        return
    table = _table("cassette", "exchanges", "first", "last", "stored")
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
@click.option("--full", is_flag=True, help="With SEQ: every body, chunk and message, uncut.")
@click.option(
    "--misses", is_flag=True, help="The requests replay missed in this cassette, newest first."
)
@click.option(
    "--unused",
    is_flag=True,
    help="The recorded exchanges the last replay (exec) never asked for, or asked out of order.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def show(
    cassette: str,
    seq: int | None,
    data_dir: str,
    store: str | None,
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
    validate_cassette_name(cassette)
    if where is not None and seq is not None:
        raise _usage_error("--run-id, --model and --status filter the list; drop them with SEQ")
    if misses:
        if seq is not None or where is not None:
            raise _usage_error("--misses lists a cassette's misses; drop SEQ and the filters")
        _show_misses(cassette, data_dir, store, as_json)
        return
    if unused:
        if seq is not None or where is not None:
            raise _usage_error("--unused lists a cassette's exchanges; drop SEQ and the filters")
        _show_unused(cassette, data_dir, store, as_json)
        return
    from freezeframe.evidence.document import exchange_document, summary_document
    from freezeframe.evidence.text import exchange_lines

    with _open(data_dir, store) as opened:
        if seq is None:
            rows = opened.exchanges(cassette, where)
        else:
            document = exchange_document(opened.exchange(cassette, seq))
        notes = opened.notes(cassette, seq)
    if seq is not None:
        if as_json:
            from freezeframe.evidence.notes import with_notes

            _emit_json(with_notes(document, notes))
        else:
            for line in exchange_lines(document, full=full):
                click.echo(_heading(line))
            _print_notes(notes)
        return
    if as_json:
        _emit_json([summary_document(row) for row in rows])
        return
    _print_exchanges(rows)
    _print_notes(notes)


def _print_notes(notes: Sequence[Note]) -> None:
    """Case notes under what ``show`` printed; nothing when there are none."""
    if notes:
        click.echo(_heading("== notes"))
    for n in notes:
        about = "" if n.seq is None else f" #{n.seq}"
        _say(f"{_time(n.at)}{about}  {n.text}")


def _show_misses(cassette: str, data_dir: str, store: str | None, as_json: bool) -> None:
    from freezeframe.evidence.document import miss_document

    with _open(data_dir, store) as opened:
        found = opened.misses(cassette)
    if as_json:
        _emit_json([miss_document(miss) for miss in found])
        return
    if not found:
        click.echo(f"no misses kept for cassette {cassette!r}")
        return
    for miss in found:
        _say(f"{_time(miss.at)}  {miss.method} {miss.url}")
        _say(f"  {miss.message}")


def _show_unused(cassette: str, data_dir: str, store: str | None, as_json: bool) -> None:
    with _open(data_dir, store) as opened:
        kept = opened.tape(cassette)
    document = None if kept is None else {"at": kept.at, **json.loads(kept.document)}
    if as_json:
        _emit_json(document)
        return
    if document is None:
        click.echo(f"no replay of {cassette!r} has kept its tape (exec --mode replay keeps it)")
        return
    click.echo(f"the last replay of {cassette!r} ended {_time(document['at'])}:")
    for row in document["unused"]:
        _say(f"  never asked for: #{row['seq']} {row['method']} {row['url']}")
    for row in document["out_of_order"]:
        _say(f"  out of order: #{row['seq']} {row['method']} {row['url']} (after #{row['after']})")
    if not document["unused"] and not document["out_of_order"]:
        click.echo("  every recorded exchange was asked for, in order")


def _say(line: str) -> None:
    """A line that carries recorded text, which must not command the terminal."""
    click.echo(inert(line, newlines=False))


def _cell(text: str) -> str:
    """A table cell of recorded text: inert, and never read as rich markup."""
    from rich.markup import escape

    return escape(inert(text, newlines=False))


def _heading(line: str) -> str:
    """Section headings in bold on a terminal (click drops the styling in a pipe)."""
    return click.style(line, bold=True) if line.startswith("== ") else line


def _print_exchanges(rows: Sequence[ExchangeSummary]) -> None:
    """The list of ``show``; the model, tokens and drift columns appear when some row has
    them."""
    from freezeframe.evidence.windows import token_counts

    models = [str(r.facts.get("answered_model") or r.facts.get("model") or "-") for r in rows]
    with_model = any(model != "-" for model in models)
    tokens = []
    for row in rows:
        usage = row.facts.get("usage")
        counted = token_counts(usage) if isinstance(usage, dict) else (None, None)
        tokens.append("-" if counted == (None, None) else "/".join(str(n or 0) for n in counted))
    with_tokens = any(cell != "-" for cell in tokens)
    with_drift = any(row.drifted for row in rows)
    with_origin = any(row.origin for row in rows)
    table = _table("seq", "started", "method", "status", "outcome", "ms", "bytes")
    if with_model:
        table.add_column("model", overflow="fold")
    if with_tokens:
        table.add_column("tokens in/out", justify="right")
    if with_drift:
        table.add_column("drift", justify="right")
    if with_origin:
        table.add_column("origin")
    table.add_column("url", overflow="fold")
    for row, model, counted in zip(rows, models, tokens, strict=True):
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
        cells += [counted] if with_tokens else []
        cells += [str(row.drifted) if row.drifted else "-"] if with_drift else []
        cells += [row.origin or "-"] if with_origin else []
        table.add_row(*(_cell(cell) for cell in cells), _cell(row.url))
    _console().print(table)


def _table(*columns: str, **options: Any) -> Any:
    """A rich table (rich is imported when a command has something to print)."""
    from rich.table import Table

    return Table(*columns, **options)


def _console() -> Console:
    """A terminal's own width; piped output as wide as a table needs, never cut to 80."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPED_WIDTH)
    return console


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
    import secrets

    from freezeframe.canonicalize import canonicalize
    from freezeframe.evidence.requests import typed_view
    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.storage.redaction import KEY_BYTES, Redactor, load_or_create_key

    directory = Path(data_dir).expanduser()
    key_path = directory / settings_module.KEY_FILENAME
    key = load_or_create_key(key_path) if key_path.is_file() else None
    body = body_file.read() if body_file else b""
    with _usage():
        view, redacted = typed_view(
            method, url, headers, body, Redactor(key or secrets.token_bytes(KEY_BYTES))
        )
    if key is None and redacted:
        click.echo(
            f"freezeframe: warning: no secret key at {key_path}, so the secrets in this body "
            "are fingerprinted with a throwaway key and its key differs from the proxy's; "
            "pass the proxy's --data-dir",
            err=True,
        )
    canonical = canonicalize(view, key_config(rules_path(rules, directory)))
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
    click.echo(f"{click.style('key', bold=True)} {canonical.key}  (profile {canonical.profile})")
    click.echo(json.dumps(document["canonical"], indent=2, ensure_ascii=False))
    if not canonical.stripped:
        click.echo("nothing stripped")
    width = max((len(part.part) for part in canonical.stripped), default=0)
    rule_width = max((len(part.rule) for part in canonical.stripped), default=0)
    for part in canonical.stripped:
        click.echo(
            f"stripped  {part.part.ljust(width)}  {part.rule.ljust(rule_width)}  {part.digest}"
        )
    for warning in canonical.warnings:
        click.echo(f"warning: {warning}")


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
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def verify(
    cassette: str | None,
    data_dir: str,
    store: str | None,
    bundle_file: Path | None,
    trust: Path | None,
    as_json: bool,
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
        _verify_bundle(bundle_file, trust, as_json)
        return
    if cassette is None:
        raise click.UsageError("missing CASSETTE (or --bundle FILE)")
    if trust is not None:
        raise click.UsageError("--trust checks a bundle's signature: add --bundle FILE")
    validate_cassette_name(cassette)
    with _open(data_dir, store) as opened:
        report = opened.verify(cassette)
    if as_json:
        _emit_json(asdict(report))
    elif report.ok:
        click.echo(f"{cassette}: intact ({report.checked} exchanges), chain head {report.head}")
        for line in report.provenance:
            click.echo(f"  {line}")
    else:
        click.echo(f"{cassette}: BROKEN at #{report.first_break}: {report.detail}", err=True)
    if not report.ok:
        sys.exit(1)


def _verify_bundle(path: Path, trust: Path | None, as_json: bool) -> None:
    report = exchange_formats.verify_bundle(path, trust)
    if as_json:
        _emit_json(asdict(report))
        return
    if report.signed_by is None:
        signed = "not signed"
    elif report.trusted:
        signed = f"signed by trusted key {report.signed_by}"
    else:
        signed = f"signed by {report.signed_by} (not checked against a key: pass --trust)"
    _say(
        f"{path}: intact: cassette {report.cassette!r}, {report.exchanges} exchanges, "
        f"{report.bodies} bodies; {signed}"
    )
    click.echo(f"  chain head {report.chain_head}, merkle root {report.merkle_root}")


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
    data_dir: str,
    store: str | None,
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

    rules_file = rules_path(rules, _located(data_dir, store)[0])
    with _open(data_dir, store) as opened:
        total = len(opened.exchanges(cassette))
        with _progress(f"exporting {cassette}", total) as advance:
            if otlp_endpoint is not None:
                spans = exchange_formats.send_otel(opened, cassette, otlp_endpoint, advance)
            else:
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
    if otlp_endpoint is not None:
        _say(f"{otlp_endpoint}: sent {spans} spans")
    elif isinstance(written, exchange_formats.BundleReport):
        signed = f", signed by {written.signed_by}" if written.signed_by else ""
        _say(
            f"{output}: {written.exchanges} exchanges, {written.bodies} bodies{signed}; "
            f"chain head {written.chain_head}, merkle root {written.merkle_root}"
        )
    else:
        unit = {"otel": "spans", "dataset": "rows"}.get(format_, "exchanges")
        _say(f"{output}: {written} {unit}")


@main.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--as", "name", metavar="NAME", help="The new cassette's name  [default: the file's]")
@_store_options
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
@_debug_option
def import_(
    file: Path, name: str | None, data_dir: str, store: str | None, rules: str | None
) -> None:
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
    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.storage import open_store
    from freezeframe.storage.leftovers import Made, new_sqlite_files
    from freezeframe.storage.redaction import Redactor, load_or_create_key

    if name is not None:
        validate_cassette_name(name)
    directory, url = _located(data_dir, store)

    def keeper(cassette: str) -> exchange_formats.Keeper:
        redactor = Redactor(load_or_create_key(directory / settings_module.KEY_FILENAME))
        return exchange_formats.Keeper(cassette, redactor, key_config(rules_path(rules, directory)))

    outbox = directory / settings_module.OUTBOX_DIRNAME
    # Refused, it leaves nothing: not the store it made, nor the directory or the key.
    made_here = Made([directory / settings_module.KEY_FILENAME, *new_sqlite_files(url)])
    try:
        source = exchange_formats.open_import(file, name, keeper)
        try:
            validate_cassette_name(source.cassette)
        except InvalidCassetteName as exc:
            raise InvalidCassetteName(f"{exc}; name the cassette with --as NAME") from None
        made = False
        try:
            opened = open_store(url, create=False, blobs=_given_blobs(), outbox=outbox)
        except StoreNotFound:
            opened, made = open_store(url, blobs=_given_blobs(), outbox=outbox), True
        with opened:
            with _progress(f"importing {file.name}", source.total) as advance:
                imported = opened.import_cassette(
                    source.cassette,
                    _counted(source.exchanges, advance),
                    origin=source.origin,
                    notes=source.case_notes,
                )
    except BaseException:
        made_here.undo()
        raise
    if made:  # said once the import held: a refused file's error stays the one line
        _note(f"made a new store at {opened.location}")
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


def _counted[T](items: Iterable[T], advance: Callable[[int], None]) -> Iterator[T]:
    for item in items:
        yield item
        advance(1)


@contextlib.contextmanager
def _progress(what: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal (stderr), nothing in a pipe."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

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
    from rich.console import Console

    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.whatif.rekey import rekey as rekey_cassette

    validate_cassette_name(cassette)
    config = key_config(rules_path(rules, _located(data_dir, store)[0]))
    with _open(data_dir, store) as opened:
        report = rekey_cassette(opened, cassette, config, dry_run=dry_run)
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
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def suggest(
    cassette: str,
    data_dir: str,
    store: str | None,
    rules_file: str | None,
    apply: bool,
    as_json: bool,
) -> None:
    """Suggest key rules from recordings of the same call that differ in volatile places.

    Each suggestion names its evidence: the exchanges, the path and the values. The
    conversation itself (messages, input, contents, system...) is never suggested.

    \b
    Example:
        freezeframe rules suggest bug-8821
        freezeframe rules suggest bug-8821 --apply
    """
    from freezeframe.proxy.keys import RULES_FILENAME, key_config_of
    from freezeframe.whatif.suggest import preview, suggestions_of

    validate_cassette_name(cassette)
    path = _located(data_dir, store)[0] / RULES_FILENAME
    if rules_file:
        path = Path(rules_file).expanduser()
    with _open(data_dir, store) as opened:
        found = suggestions_of(opened, cassette)
        planned = None
        if apply and found:
            current = path.read_text(encoding="utf-8") if path.is_file() else ""
            planned = preview(opened, cassette, found, current, str(path), key_config_of)
    if as_json:
        document: dict[str, Any] = {"suggestions": [s.document() for s in found]}
        if planned is not None:
            document["applied"] = {
                "rules_file": str(path),
                "collisions": [asdict(c) for c in planned.report.collisions],
                "changed": len(planned.report.changed),
                "misses_turned_into_hits": [m.url for m in planned.hits],
            }
    else:
        if not found:
            click.echo(f"{cassette}: no recordings give evidence for a rule")
        for one in found:
            click.echo(one.line())
            click.echo(textwrap.indent(one.toml(), "    "), nl=False)
        if planned is not None:
            click.echo(
                f"rekey would change {len(planned.report.changed)} keys of {cassette}: "
                f"{len(planned.report.collisions)} merged, "
                f"{len(planned.hits)} recorded misses turned into hits"
            )
            for group in planned.report.collisions:
                click.echo("  merged: " + ", ".join(f"#{seq}" for seq in group.seqs))
            for miss in planned.hits:
                click.echo(f"  would hit: {miss.method} {miss.url}")
    if planned is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(planned.text, encoding="utf-8")
        _note(f"added {len(found)} rules to {path}; run `freezeframe rekey {cassette}` to re-key")
    if as_json:
        _emit_json(document)


@main.command()
@click.argument("query")
@click.option("--cassette", default=None, help="Only in this cassette.")
@click.option("--limit", default=50, show_default=True, help="At most this many exchanges.")
@_store_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def search(
    query: str,
    cassette: str | None,
    limit: int,
    data_dir: str,
    store: str | None,
    as_json: bool,
) -> None:
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
    with _open(data_dir, store) as opened:
        hits = opened.search(query, cassette, limit)
        noted = opened.search_notes(query, cassette, limit)
    if as_json:
        from freezeframe.evidence.document import search_document
        from freezeframe.evidence.notes import note_hit

        _emit_json([search_document(hit) for hit in hits] + [note_hit(n) for n in noted])
        return
    for n in noted:
        _say(f"note on {n.cassette}" + ("" if n.seq is None else f" #{n.seq}") + f": {n.text}")
    if noted and not hits:
        return
    if not hits:
        within = f" in cassette {cassette!r}" if cassette is not None else ""
        _say(f"nothing found for {query!r}{within}")
        return
    table = _table("cassette", "seq", "started", "method", "status", "in", "match", "url")
    for hit in hits:
        table.add_row(
            hit.cassette,
            str(hit.seq),
            _time(hit.started_at),
            hit.method,
            str(hit.status) if hit.status is not None else "-",
            ", ".join(hit.parts),
            _cell(hit.match),
            _cell(hit.url),
        )
    _console().print(table)


@main.command()
@click.argument("source")
@click.argument("target")
@click.option("--upto", type=int, default=None, metavar="SEQ", help="Copy exchanges 0 to SEQ only.")
@_store_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def fork(
    source: str, target: str, upto: int | None, data_dir: str, store: str | None, as_json: bool
) -> None:
    """Make cassette TARGET from SOURCE's exchanges, sharing their bodies; SOURCE never changes.

    TARGET's chain starts from its provenance (SOURCE, the last seq copied, SOURCE's chain
    head), so `freezeframe verify TARGET` proves what it was forked from.

    \b
    Example:
        freezeframe fork bug-8821 bug-8821-upto5 --upto 5
    """
    validate_cassette_name(source)
    validate_cassette_name(target)
    with _open(data_dir, store) as opened:
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
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def edit(
    cassette: str,
    seq: int,
    target: str,
    response_body: Any,
    sets: tuple[str, ...],
    status: int | None,
    headers: tuple[str, ...],
    data_dir: str,
    store: str | None,
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
    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.whatif.editing import AnswerEdit, Assignment, edited

    validate_cassette_name(cassette)
    validate_cassette_name(target)
    with _usage():
        assignments = tuple(Assignment.parse(text) for text in sets)
        pairs = tuple(_header_pair(text) for text in headers)
    change = AnswerEdit(
        body=response_body.read() if response_body is not None else None,
        sets=assignments,
        status=status,
        headers=pairs,
        source=getattr(response_body, "name", "a file"),
    )
    config = key_config(rules_path(rules, _located(data_dir, store)[0]))
    with _open(data_dir, store) as opened:
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
@_setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
@_setting(
    "--upstream-ca",
    "Extra CA (PEM) trusted for the upstream, on top of the system's.",
    metavar="FILE",
)
@_setting("--upstream-proxy", "Send through this proxy: http(s)://host:port.", metavar="URL")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def resend(
    cassette: str,
    seq: int,
    target: str,
    sets: tuple[str, ...],
    headers: tuple[str, ...],
    as_fork: bool,
    data_dir: str,
    store: str | None,
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
    import ssl

    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.proxy.trust import upstream_bundle
    from freezeframe.storage.redaction import Redactor, load_or_create_key
    from freezeframe.whatif.editing import Assignment
    from freezeframe.whatif.resend import resend as resend_exchange

    validate_cassette_name(cassette)
    validate_cassette_name(target)
    directory = _located(data_dir, store)[0]
    verify: ssl.SSLContext | bool = True
    if upstream_ca:
        settings_module.check_certificates(Path(upstream_ca).expanduser(), "upstream CA")
        bundle = upstream_bundle(directory, Path(upstream_ca).expanduser())
        verify = ssl.create_default_context(cafile=str(bundle))
    proxy = settings_module.UpstreamProxy.parse(upstream_proxy) if upstream_proxy else None
    with _usage():
        assignments = [Assignment.parse(text) for text in sets]
        pairs = [_header_pair(text) for text in headers]
    with _open(data_dir, store) as opened:
        resent = resend_exchange(
            opened,
            opened.exchange(cassette, seq),
            target,
            sets=assignments,
            headers=pairs,
            redactor=Redactor(load_or_create_key(directory / settings_module.KEY_FILENAME)),
            config=key_config(rules_path(rules, directory)),
            verify=verify,
            proxy=proxy.with_credentials() if proxy else None,
            fork=as_fork,
        )
    if as_json:
        _emit_json(asdict(resent))
        return
    click.echo(
        f"resent {cassette}#{seq}: {resent.status if resent.status is not None else '-'} "
        f"{resent.outcome}, recorded as {resent.cassette}#{resent.seq}"
        + (f" in a fork of {cassette!r}" if resent.forked else "")
    )
    if not resent.differences:
        click.echo("the new answer is the same as the recorded one")
    for what, recorded, new in resent.differences:
        _say(f"  {what}: {recorded} -> {new}")
    if resent.ids:
        click.echo("new ids, each standing for the recorded one:")
    for recorded_id, new_id in resent.ids:
        _say(f"  {new_id} stands for {recorded_id}")


@main.command(name="diff")
@click.argument("a")
@click.argument("b")
@_store_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option(
    "--strict", is_flag=True, help="Compare the ids a model makes up byte for byte, not by role."
)
@_debug_option
def diff_runs(
    a: str, b: str, data_dir: str, store: str | None, as_json: bool, strict: bool
) -> None:
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

    with _open(data_dir, store) as opened:
        compared = compare_runs(a, read_run(opened, a), b, read_run(opened, b), strict=strict)
    if as_json:
        _emit_json(diff_document(compared))
    else:
        _print_diff(compared)
    sys.exit(0 if compared.equivalent else 1)


def _print_diff(compared: RunDiff) -> None:
    first = compared.first_divergence
    if first is None:
        click.echo(f"{compared.a} and {compared.b} are equivalent, step for step")
    else:
        pair = compared.steps[first]
        where = (
            f"#{pair.a if pair.a is not None else '-'} / #{pair.b if pair.b is not None else '-'}"
        )
        _say(f"{compared.a} and {compared.b} diverge at step {first + 1} ({where}): {pair.title}")
    for n, pair in enumerate(compared.steps, start=1):
        left = f"#{pair.a}" if pair.a is not None else "-"
        right = f"#{pair.b}" if pair.b is not None else "-"
        mark = "≠" if pair.diverges else "="
        alone = " (only in A)" if pair.b is None else " (only in B)" if pair.a is None else ""
        _say(f"{n:>3} {left:>5} {mark} {right:<5} {pair.kind:<5} {pair.title}{alone}")
        for kind, changes in (
            ("request", pair.request),
            ("answer", pair.answer),
            ("metadata", pair.metadata),
            ("timing", pair.timing),
        ):
            for change in changes:
                _say(f"      {kind} {change.what}: {change.a} -> {change.b}")


def _header_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"--header {text!r}: expected 'Name: value'")
    return name.strip(), value.strip()


@main.command(name="rm")
@click.argument("cassette")
@_store_options
@click.option("--yes", is_flag=True, help="Do not ask; needed when not on a terminal.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def rm(cassette: str, data_dir: str, store: str | None, yes: bool, as_json: bool) -> None:
    """Remove a cassette: its exchanges, drift notes, and the bodies no other cassette uses.

    Asks first on a terminal; elsewhere, --yes is required. Stop any proxy recording
    into the cassette first: it counts positions in memory. To record a cassette again
    from scratch in one step, start the proxy with --fresh instead.

    \b
    Example:
        freezeframe rm bug-8812 --yes
    """
    from freezeframe.evidence.words import plural

    validate_cassette_name(cassette)
    with _open(data_dir, store) as opened:
        if not yes:
            count = len(opened.exchanges(cassette))
            if not sys.stdin.isatty():
                raise ValueError(
                    f"rm would remove cassette {cassette!r} ({plural(count, 'exchange')}); "
                    "pass --yes to do it without a terminal to ask on"
                )
            click.confirm(
                f"remove cassette {cassette!r} ({plural(count, 'exchange')})?", abort=True
            )
        removed = opened.remove(cassette)
    if as_json:
        _emit_json(asdict(removed))
        return
    click.echo(
        f"removed cassette {cassette!r}: {plural(removed.exchanges, 'exchange')}, "
        f"{plural(removed.bodies, 'body')} ({_size(removed.freed)}) that no other cassette used"
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
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def gc(data_dir: str, store: str | None, dry_run: bool, grace: str, as_json: bool) -> None:
    """Remove the bodies and search values no cassette uses, and say what that freed.

    Bodies a cassette no longer uses are left by failed imports, exchanges that were never
    written, and stores from before schema 5 (rm and edits remove theirs at once). Safe
    while proxies record into the store.

    \b
    Example:
        freezeframe gc --dry-run
    """
    with _usage():
        seconds = settings_module.parse_duration(grace, "--grace")
    with _open(data_dir, store) as opened:
        found = opened.collect(seconds, dry_run=dry_run)
    if as_json:
        _emit_json(asdict(found) | {"dry_run": dry_run})
        return
    verb = "would remove" if dry_run else "removed"
    objects = f", and {found.objects} objects in object storage" if found.objects else ""
    click.echo(
        f"{verb} {found.bodies} bodies no cassette uses ({_size(found.freed)}) "
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
def blobs_move(data_dir: str, store: str | None, target: str) -> None:
    """Move a store's bodies into object storage, or back into the SQL store.

    One body at a time, so proxies may keep recording meanwhile, and a move stopped half
    way can be run again. Run proxies with --blobs set to the same URL from then on.

    \b
    Example:
        freezeframe blobs move --to s3://traffic/freezeframe
        freezeframe blobs move --to sql --blobs s3://traffic/freezeframe
    """
    with _open(data_dir, store) as opened:
        moved = opened.move_bodies(target)
    where = "the SQL store" if target == "sql" else target
    click.echo(f"moved {moved} bodies into {where}")


@main.command()
@_store_options
@click.option("--no-browser", is_flag=True, help="Print the case file's URL; open no browser.")
@_debug_option
def demo(data_dir: str, store: str | None, no_browser: bool) -> None:
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
    from freezeframe.proxy.demo import CASSETTE, Outcome, Proxy, can_open_browser, run_demo

    def then(replayer: Proxy, outcome: Outcome) -> None:
        verdict = "yes" if outcome.identical else "NO"
        click.echo(f"replay was identical: {verdict} (the model and the tool were stopped)")
        click.echo(f"cassette {CASSETTE!r} is in {_located(data_dir, store)[1]}")
        click.echo(f"  freezeframe ls; freezeframe show {CASSETTE}")
        url = f"{replayer.admin}/cassettes/{CASSETTE}"
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            click.echo(f"case file: {url}")
            click.echo(f"  (served by: freezeframe run --mode replay --cassette {CASSETTE})")
            return
        click.echo(f"case file: {url} (served until Ctrl-C)")
        if not no_browser and can_open_browser():
            import webbrowser

            webbrowser.open(url)
        with contextlib.suppress(KeyboardInterrupt):
            replayer.process.wait()

    directory, url = _located(data_dir, store)
    outcome = run_demo(directory, store, _say, then)
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
    import httpx

    from freezeframe.proxy.discovery import NoProxyFound, admin_headers, admin_url

    address = settings_module.Address.parse(admin, "admin address")
    url = f"{admin_url(address)}/api/replay/reset"
    try:
        answer = httpx.post(url, timeout=10.0, trust_env=False, headers=admin_headers(admin_token))
    except httpx.HTTPError as exc:
        raise NoProxyFound(f"POST {url} failed: {exc}; is freezeframe running there?") from None
    if answer.status_code == 401:
        given = "the one given is wrong" if admin_token else "none was given"
        raise NoProxyFound(
            f"POST {url}: the proxy asks for its admin token and {given}; "
            "set FREEZEFRAME_ADMIN_TOKEN or pass --admin-token"
        )
    try:
        answer.raise_for_status()
        mode = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise NoProxyFound(f"POST {url} failed: {exc}; is freezeframe running there?") from None
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
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_debug_option
def triage(
    since: str | None,
    pattern: str | None,
    kind: str | None,
    rebuild: bool,
    data_dir: str,
    store: str | None,
    as_json: bool,
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
    from freezeframe.evidence.signatures import SIGNATURE_VERSION
    from freezeframe.evidence.triage import (
        find_groups,
        parse_duration,
        pending_count,
        stale_cassettes,
        triage_document,
    )
    from freezeframe.evidence.triage import numbers as group_numbers
    from freezeframe.evidence.triage import rebuild as rebuild_signals
    from freezeframe.evidence.words import plural

    window = None if since is None else parse_duration(since)
    with _open(data_dir, store) as opened:
        if rebuild:
            unsigned = pending_count(opened)
            cassettes = stale_cassettes(opened)
            with _progress("signing", sum(cassettes.values())) as advance:
                rebuilt = rebuild_signals(opened, advance)
            click.echo(
                f"worked out the signatures of {plural(unsigned, 'exchange')} that had none "
                f"under the current rules (v{SIGNATURE_VERSION}), reading all "
                f"{plural(rebuilt, 'exchange')} of their {plural(len(cassettes), 'cassette')}",
                err=True,
            )
        found = find_groups(opened, since=window, pattern=pattern, kind=kind)
        numbered = group_numbers(opened)
        stale = 0 if rebuild else pending_count(opened)
    if stale:
        click.echo(
            f"{plural(stale, 'exchange')} {'has' if stale == 1 else 'have'} no signature under "
            f"the current rules (v{SIGNATURE_VERSION}); run `freezeframe triage --rebuild` to "
            "include them",
            err=True,
        )
    if as_json:
        _emit_json(triage_document(found, numbered=numbered))
        return
    if not found:
        click.echo("no failures found")
        return
    _print_groups(found, numbered)


def _print_groups(found: Sequence[Any], numbered: dict[str, int]) -> None:
    """triage's listing, as the /triage page has it: a group's number (what ``recheck``
    takes), counts, kind, times and first failure on one line, and its signature whole
    below, wrapped to the terminal's width (a table column cut it to ten characters)."""
    import textwrap

    from freezeframe.evidence.words import plural

    console = _console()
    width = max(console.width, 40) if console.is_terminal else None  # piped: whole lines
    for group in found:
        head = inert(
            f"#{numbered.get(group.signature, '-')}  {plural(group.count, 'failure')} in "
            f"{plural(len(group.runs), 'run')} · {_time(group.first_seen)} – "
            f"{_time(group.last_seen)} · first: {group.example.cassette} {group.example.seq}",
            newlines=False,
        )
        signature = inert(group.signature, newlines=False)
        if width is None:
            click.echo(f"{head}\n    {signature}")
            continue
        for line in textwrap.wrap(head, width, subsequent_indent="      "):
            click.echo(line)
        for line in textwrap.wrap(signature, width - 4):
            click.echo(f"    {line}")


@main.command()
@click.argument("target", metavar="CASSETTE[:SEQ]")
@click.argument("text")
@_store_options
@_debug_option
def note(target: str, text: str, data_dir: str, store: str | None) -> None:
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
    with _open(data_dir, store) as opened:
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
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
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
    data_dir: str,
    store: str | None,
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
    import asyncio

    from freezeframe.evidence.triage import find_group
    from freezeframe.sandbox import recheck as rechecking
    from freezeframe.sandbox.command import Confinement

    live_only = (max_live_calls, budget, model_url)
    if not live and (tries != 5 or any(given is not None for given in live_only)):
        raise click.UsageError("--tries, --max-live-calls, --budget and --model-url go with --live")
    _configure_logging(click.get_current_context().meta.get("freezeframe.debug", False))
    settings = settings_module.build(
        mode="replay",
        cassette="default",
        data_dir=data_dir,
        store=store,
        listen=listen,
        admin=admin,
        upstream_ca=upstream_ca,
        blobs=_given_blobs(),
        replay_pace="instant",
        miss_details=True,
    )
    confinement = Confinement(isolate=isolate)
    with _open(data_dir, store) as opened:
        found = find_group(opened, group)
        aside = None if as_json or verbose else _details_file("recheck")
        if live:
            limits = rechecking.Live(
                tries,
                max_live_calls,
                budget,
                None if model_url is None else settings_module.parse_model_url(model_url),
            )
            planned = rechecking.estimate(opened, found, tries)
            _note(planned.line())
            refusal = planned.refusal(limits)
            if refusal is not None:
                _fail(refusal)
            with _output_to_stderr(as_json), _output_to(aside) as say:
                report = asyncio.run(
                    rechecking.recheck_live(
                        opened,
                        found,
                        command,
                        settings,
                        limits,
                        confinement,
                        lambda check: None if as_json else say(rechecking.live_line(check)),
                    )
                )
            if aside is not None:
                _note(f"COMMAND's output and the proxies' logs: {aside} (-v shows them here)")
            rechecking.keep(opened, rechecking.live_document(report))
            _said_live(report, as_json)
            return
        with _output_to_stderr(as_json), _output_to(aside) as say:
            replayed = asyncio.run(
                rechecking.recheck(
                    opened,
                    found,
                    command,
                    settings,
                    confinement,
                    lambda check: None if as_json else say(rechecking.check_line(check)),
                )
            )
        if aside is not None:
            _note(f"COMMAND's output and the proxies' logs: {aside} (-v shows them here)")
        rechecking.keep(opened, rechecking.recheck_document(replayed))
    if as_json:
        _emit_json(rechecking.recheck_document(replayed))
    else:
        verdict = "collapsed: every run passes" if replayed.collapsed else "still failing"
        passed = sum(check.passed for check in replayed.runs)
        click.echo(f"{passed} of {len(replayed.runs)} runs pass; the group is {verdict}")
    sys.exit(0 if replayed.collapsed else 1)


def _said_live(report: Any, as_json: bool) -> NoReturn:
    """The end of ``recheck --live``: the document, or the group's line; exit 0 when every
    run is fixed."""
    from freezeframe.sandbox.recheck import live_document

    if as_json:
        _emit_json(live_document(report))
    else:
        tally = report.tally
        low, high = tally.interval
        click.echo(
            f"{tally.passed} of {tally.tries} tries passed over {len(report.runs)} runs, "
            f"flip rate {tally.flip_rate:.2f} (95% {low:.2f}-{high:.2f}); the group is "
            + ("fixed" if report.collapsed else "not fixed")
        )
    if report.stopped:
        untried = f"; not tried: {', '.join(report.untried)}" if report.untried else ""
        _note(f"stopped early: {report.stopped}{untried}")
    sys.exit(0 if report.collapsed else 1)


def _details_file(what: str) -> Path:
    """A new log file (0600) for what a command runs says, beside the others of its kind."""
    import tempfile

    handle, name = tempfile.mkstemp(prefix=f"freezeframe-{what}-", suffix=".log")
    os.close(handle)
    return Path(name)


@contextlib.contextmanager
def _output_to(path: Path | None) -> Iterator[Callable[[str], None]]:
    """While open, the process's stdout and stderr (its log, and every command it runs)
    write to ``path``; what it yields writes a line to the real stdout. With None, nothing
    moves."""
    if path is None:
        yield _say
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    aside = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.dup2(aside, 1)
    os.dup2(aside, 2)
    os.close(aside)

    def say(line: str) -> None:
        os.write(saved[0], (inert(line, newlines=False) + "\n").encode())

    try:
        yield say
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


@contextlib.contextmanager
def _output_to_stderr(moved: bool) -> Iterator[None]:
    """When ``moved``, the output of the commands run meanwhile goes to stderr, so that
    stdout is the one JSON document."""
    if not moved:
        yield
        return
    stdout = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(stdout, 1)
        os.close(stdout)
