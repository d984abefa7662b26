"""The commands of failure triage (docs/triage.md): ``triage`` groups failing runs by
what went wrong, ``note`` keeps a case note, ``recheck`` runs a command against every run of
a group, in replay or with the model live.
"""

from __future__ import annotations

import sys
import time

import click

from freezeframe.commands.context import debugging, given_blobs, open_store, option_value
from freezeframe.commands.options import JSON, debug_option, setting, store_options
from freezeframe.commands.output import (
    configure_logging,
    echo,
    emit_json,
    fail,
    inform,
    progress,
    rich_console,
    say,
)
from freezeframe.proxy import settings as settings_module
from freezeframe.storage import Note
from freezeframe.storage.names import validate_cassette_name

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


@click.command()
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
@store_options
@JSON
@debug_option
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
    with open_store() as opened:
        if rebuild:
            unsigned = triaging.pending_count(opened)
            cassettes = triaging.stale_cassettes(opened)
            with progress("signing", sum(cassettes.values())) as advance:
                rebuilt = triaging.rebuild(opened, advance)
            click.echo(listings.rebuilt_line(unsigned, rebuilt, len(cassettes)), err=True)
        found = triaging.find_groups(opened, since=window, pattern=pattern, kind=kind)
        numbered = triaging.numbers(opened)
        stale = 0 if rebuild else triaging.pending_count(opened)
    if stale:
        click.echo(listings.unsigned_line(stale), err=True)
    if as_json:
        emit_json(triaging.triage_document(found, numbered=numbered))
    elif not found:
        click.echo("no failures found")
    else:
        console = rich_console()
        width = max(console.width, 40) if console.is_terminal else None  # piped: whole lines
        echo(listings.groups_lines(found, numbered, width))


@click.command()
@click.argument("target", metavar="CASSETTE[:SEQ]")
@click.argument("text")
@store_options
@debug_option
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
    with open_store() as opened:
        opened.add_note(Note(cassette, seq, time.time(), text))
    click.echo(f"noted on {cassette}" + ("" if seq is None else f" exchange {seq}"))


@click.command()
@click.argument("group", metavar="GROUP")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@store_options
@setting("--listen", "Proxy listen address for each run.", default="127.0.0.1:8080")
@setting("--admin", "Admin API + web UI address for each run.", default="127.0.0.1:8081")
@setting(
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
@setting("--upstream-ca", "With --live: a PEM CA bundle the model's certificate may chain to.")
@JSON
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show COMMAND's output and each run's proxy log here, not only in a log file.",
)
@debug_option
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
    configure_logging(debugging())
    settings = settings_module.build(
        mode="replay",
        cassette="default",
        data_dir=option_value("data_dir"),
        store=option_value("store"),
        listen=listen,
        admin=admin,
        upstream_ca=upstream_ca,
        blobs=given_blobs(),
        replay_pace="instant",
        miss_details=True,
    )
    confinement = Confinement(isolate=isolate)
    with open_store() as opened:
        found = find_group(opened, group)
        aside = None if as_json or verbose else details_file("recheck")
        limits = None
        if live:
            url = None if model_url is None else settings_module.parse_model_url(model_url)
            limits = rechecking.Live(tries, max_live_calls, budget, url)
            planned = rechecking.estimate(opened, found, tries)
            inform(planned.line())
            refusal = planned.refusal(limits)
            if refusal is not None:
                fail(refusal)
        report = rechecking.recheck_group(
            opened,
            found,
            command,
            settings,
            confinement,
            limits,
            quiet=as_json,
            aside=aside,
            say=say,
        )
        if aside is not None:
            inform(f"COMMAND's output and the proxies' logs: {aside} (-v shows them here)")
    if as_json:
        emit_json(rechecking.report_document(report))
    else:
        click.echo(rechecking.summary_line(report))
    if isinstance(report, rechecking.LiveRecheck) and report.stopped:
        untried = f"; not tried: {', '.join(report.untried)}" if report.untried else ""
        inform(f"stopped early: {report.stopped}{untried}")
    sys.exit(0 if report.collapsed else 1)
