"""The commands that read a store and change nothing: ``ls``, ``show``, ``search``,
``diff``, ``verify``; and ``explain``, which reads one request given on the command line.

What they print is built in ``evidence`` (``listings``, ``document``, ``text``); a reader
never imports the proxy engine, so it answers at once (tests/test_cli_fast.py).
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from freezeframe import exchange_formats
from freezeframe.commands.context import open_store
from freezeframe.commands.options import (
    JSON,
    RULES,
    debug_option,
    filter_options,
    setting,
    store_options,
    usage,
    usage_error,
)
from freezeframe.commands.output import echo, emit_json, rich_console
from freezeframe.proxy import settings as settings_module
from freezeframe.storage import ExchangeFilter
from freezeframe.storage.names import validate_cassette_name


@click.command(name="ls")
@store_options
@filter_options
@JSON
@debug_option
def ls(where: ExchangeFilter | None, as_json: bool) -> None:
    """List cassettes: name, exchanges, first and last time, size stored.

    With a filter, only cassettes holding a matching exchange are listed, and
    "exchanges" counts the matching ones.

    \b
    Example:
        freezeframe ls --json
        freezeframe ls --run-id ci-4411 --status 429
    """
    with open_store() as opened:
        rows = opened.cassettes(where)
    if as_json:
        from freezeframe.evidence.document import cassette_document

        emit_json([cassette_document(row) for row in rows])
        return
    from freezeframe.evidence.listings import cassettes_table

    rich_console().print(cassettes_table(rows))


@click.command()
@click.argument("cassette")
@click.argument("seq", type=int, required=False)
@store_options
@filter_options
@click.option("--full", is_flag=True, help="With SEQ: every body, chunk and message, uncut.")
@click.option(
    "--misses", is_flag=True, help="The requests replay missed in this cassette, newest first."
)
@click.option(
    "--unused",
    is_flag=True,
    help="The recorded exchanges the last replay (exec) never asked for, or asked out of order.",
)
@JSON
@debug_option
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
        raise usage_error("--run-id, --model and --status filter the list; drop them with SEQ")
    if misses or unused:
        flag, listed = ("misses", "misses") if misses else ("unused", "exchanges")
        if seq is not None or where is not None:
            raise usage_error(f"--{flag} lists a cassette's {listed}; drop SEQ and the filters")
        with open_store() as opened:
            if misses:
                found = opened.misses(cassette)
            else:
                kept = documents.tape_document(opened.tape(cassette))
        if misses and as_json:
            emit_json([documents.miss_document(miss) for miss in found])
        elif misses:
            echo(listings.misses_lines(cassette, found))
        elif as_json:
            emit_json(kept)
        else:
            echo(listings.unused_lines(cassette, kept))
        return
    with open_store() as opened:
        if seq is None:
            rows = opened.exchanges(cassette, where)
        else:
            one = documents.exchange_document(opened.exchange(cassette, seq))
        notes = opened.notes(cassette, seq)
    if as_json:
        if seq is None:
            emit_json([documents.summary_document(row) for row in rows])
        else:
            emit_json(with_notes(one, notes))
        return
    if seq is None:
        rich_console().print(listings.exchanges_table(rows))
    else:
        echo(exchange_lines(one, full=full), headings=True)
    echo(listings.notes_lines(notes), headings=True)


@click.command()
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
@JSON
@setting(
    "--data-dir",
    "Whose secret key fingerprints redacted values, as the proxy does.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@RULES
@debug_option
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
    with usage():
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
        emit_json(keys.explained_document(canonical))
        return
    click.echo(f"{click.style('key', bold=True)} {canonical.key}  (profile {canonical.profile})")
    echo(keys.explained_lines(canonical))


@click.command()
@click.argument("cassette", required=False)
@store_options
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
@JSON
@debug_option
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
            emit_json(asdict(checked))
        else:
            echo(exchange_formats.bundle_lines(bundle_file, checked))
        return
    if cassette is None:
        raise click.UsageError("missing CASSETTE (or --bundle FILE)")
    if trust is not None:
        raise click.UsageError("--trust checks a bundle's signature: add --bundle FILE")
    validate_cassette_name(cassette)
    with open_store() as opened:
        report = opened.verify(cassette)
    if as_json:
        emit_json(asdict(report))
    elif report.ok:
        from freezeframe.evidence.listings import verify_lines

        echo(verify_lines(cassette, report))
    else:
        click.echo(f"{cassette}: BROKEN at #{report.first_break}: {report.detail}", err=True)
    if not report.ok:
        sys.exit(1)


@click.command()
@click.argument("query")
@click.option("--cassette", default=None, help="Only in this cassette.")
@click.option("--limit", default=50, show_default=True, help="At most this many exchanges.")
@store_options
@JSON
@debug_option
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
    with open_store() as opened:
        hits = opened.search(query, cassette, limit)
        noted = opened.search_notes(query, cassette, limit)
    if as_json:
        from freezeframe.evidence.document import search_document
        from freezeframe.evidence.notes import note_hit

        emit_json([search_document(hit) for hit in hits] + [note_hit(n) for n in noted])
        return
    from freezeframe.evidence import listings

    echo(listings.search_lines(query, cassette, hits, noted))
    if hits:
        rich_console().print(listings.search_table(hits))


@click.command(name="diff")
@click.argument("a")
@click.argument("b")
@store_options
@JSON
@click.option(
    "--strict", is_flag=True, help="Compare the ids a model makes up byte for byte, not by role."
)
@debug_option
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

    with open_store() as opened:
        compared = compare_runs(a, read_run(opened, a), b, read_run(opened, b), strict=strict)
    if as_json:
        emit_json(diff_document(compared))
    else:
        echo(diff_lines(compared))
    sys.exit(0 if compared.equivalent else 1)
