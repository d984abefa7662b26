"""The commands that start a proxy: ``run`` on its own, ``exec`` around a command (or
several runs of it), ``demo`` around a small agent of its own.

The proxy engine (mitmproxy) is imported inside them, when they start one, never by
``--help`` or by a command that only reads a store.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import click

from freezeframe.commands.context import (
    debugging,
    given_blobs,
    located,
    open_store,
    option_value,
    user_set,
)
from freezeframe.commands.options import debug_option, run_options, setting, store_options
from freezeframe.commands.output import (
    configure_logging,
    emit_json,
    fail,
    inform,
    rich_console,
    say,
)
from freezeframe.proxy import settings as settings_module

CAPTURES = ("transparent", "local")
"""The values of ``exec --capture`` (``sandbox.command`` checks them against its own)."""


@click.command()
@run_options
@debug_option
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

    settings = settings_module.build(**options, blobs=given_blobs())
    if settings.store_writer == "process" and not settings.writer_at_first_write:
        writerprocess.start_early()  # it imports the store while this process imports the proxy
    try:
        from freezeframe.proxy.serve import serve_process

        configure_logging(debugging())
        asyncio.run(serve_process(settings))
    finally:
        writerprocess.forget_early()  # a start that failed before the store opened


@click.command(name="exec")
@run_options
@click.option(
    "--proxy",
    "proxy_url",
    default=None,
    metavar="URL",
    help="Use this running proxy instead of starting one (its CA is asked of --admin).",
)
@setting(
    "--capture",
    "Also record clients that ignore proxy settings: transparent (a network namespace "
    "whose every connection reaches the proxy; root) or local (mitmproxy's eBPF redirector).",
    type=click.Choice(CAPTURES),
)
@setting(
    "--isolate/--no-isolate",
    "Run COMMAND in a network namespace where only the proxy is reachable  "
    "[default: on in replay where the system allows it]",
    envvar="FREEZEFRAME_ISOLATE",
    default=None,
)
@setting(
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
@setting(
    "--strict/--no-strict",
    "In replay: fail when a recorded exchange was never asked for, or was answered out of "
    "recorded order, and name it.",
    envvar="FREEZEFRAME_STRICT",
    default=False,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@debug_option
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

    configure_logging(debugging())
    confinement = Confinement(capture=capture, isolate=isolate)
    faked = faked_clock(clock, open_store, options["cassette"]) if clock else None
    if options["miss_details"] is None:
        options["miss_details"] = True  # the proxy exec starts answers its one run alone
    if runs > 1 or as_json:
        if proxy_url is not None:
            raise click.UsageError("--runs starts a proxy for each run: drop --proxy")
        if strict:
            raise click.UsageError("--strict checks one run: drop --runs and --json")
        settings = settings_module.build(**options, blobs=given_blobs())
        with output_to_stderr(as_json):  # stdout is the one JSON document
            done = asyncio.run(
                run_repeatedly(command, settings, runs, confinement=confinement, clock=faked)
            )
        if as_json:
            emit_json({"runs": [run.document() for run in done]})
        else:
            console = rich_console()
            for table in runs_tables(done):
                console.print(table)
        sys.exit(0 if all(run.status == 0 for run in done) else 1)
    if proxy_url is None:
        from freezeframe.sandbox.strict import run_with_tape

        settings = settings_module.build(**options, blobs=given_blobs())
        status, tapes, drifted = asyncio.run(run_with_tape(command, settings, confinement, faked))
        for line in [*drifted, *(line for tape in tapes for line in tape.lines(strict))]:
            inform(line)
        if status == 0 and any(tape.failed(strict) for tape in tapes):
            fail("--strict: the run left the tape as listed above")
        sys.exit(status)
    if strict:
        raise click.UsageError("--strict reads the journal of the proxy exec starts: drop --proxy")
    explicit = Path(options["data_dir"]).expanduser() if user_set("data_dir") else None
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


@click.command()
@store_options
@click.option("--no-browser", is_flag=True, help="Print the case file's URL; open no browser.")
@debug_option
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

    place = located()
    outcome = run_demo(
        place.data_dir,
        option_value("store"),
        say,
        lambda replayer, done: present(replayer, done, place.url, not no_browser, click.echo),
    )
    sys.exit(0 if outcome.identical else 1)
