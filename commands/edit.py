"""The commands that change recordings on purpose, always into a new cassette: ``fork``,
``edit``, ``resend``; and those that change how requests are keyed: ``rekey`` and
``rules suggest``. The work is done in ``whatif`` (docs/what-if.md, docs/keys.md).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from freezeframe.commands.context import located, open_store
from freezeframe.commands.options import JSON, RULES, debug_option, setting, store_options, usage
from freezeframe.commands.output import echo, emit_json, inform, say
from freezeframe.proxy import settings as settings_module
from freezeframe.storage.names import validate_cassette_name


@click.command()
@click.argument("source")
@click.argument("target")
@click.option("--upto", type=int, default=None, metavar="SEQ", help="Copy exchanges 0 to SEQ only.")
@store_options
@JSON
@debug_option
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
    with open_store() as opened:
        forked = opened.fork(source, target, upto=upto)
    if as_json:
        emit_json(asdict(forked))
        return
    copied = "every exchange" if upto is None else f"exchanges 0 to {upto}"
    click.echo(
        f"forked {source!r} into {target!r}: {forked.exchanges} exchanges ({copied}), "
        f"chain head {forked.head}"
    )


@click.command()
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
@store_options
@RULES
@JSON
@debug_option
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
    with usage():
        assignments = tuple(Assignment.parse(text) for text in sets)
        pairs = tuple(header_pair(text) for text in headers)
    change = AnswerEdit(
        body=response_body.read() if response_body is not None else None,
        sets=assignments,
        status=status,
        headers=pairs,
        source=getattr(response_body, "name", "a file"),
    )
    config = rules_config(rules, located().data_dir)
    with open_store() as opened:
        made = edited(opened.exchange(cassette, seq), change, config)
        forked = opened.fork(cassette, target, edits={seq: made})
        sign_cassette(opened, target)
    if as_json:
        emit_json(asdict(forked) | {"seq": seq, "changes": list(made.changes)})
        return
    click.echo(f"forked {cassette!r} into {target!r} with #{seq} edited:")
    for line in made.changes:
        say(f"  {line}")


@click.command()
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
@store_options
@RULES
@setting(
    "--upstream-ca",
    "Extra CA (PEM) trusted for the upstream, on top of the system's.",
    metavar="FILE",
)
@setting("--upstream-proxy", "Send through this proxy: http(s)://host:port.", metavar="URL")
@JSON
@debug_option
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
    directory = located().data_dir
    verify = upstream_verify(directory, upstream_ca)
    proxy = settings_module.UpstreamProxy.parse(upstream_proxy) if upstream_proxy else None
    with usage():
        assignments = [Assignment.parse(text) for text in sets]
        pairs = [header_pair(text) for text in headers]
    with open_store() as opened:
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
        emit_json(asdict(resent))
        return
    echo(resent_lines(cassette, seq, resent))


@click.command()
@click.argument("cassette")
@store_options
@RULES
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@JSON
@debug_option
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
    config = rules_config(rules, located().data_dir)
    with open_store() as opened:
        report = rekey_cassette(opened, cassette, config, dry_run=dry_run)
    if as_json:
        emit_json(asdict(report))
        return
    console = Console()
    for line in report_lines(report):
        console.print(line, highlight=False)


@click.group()
def rules() -> None:
    """Key rules learned from the recordings.

    \b
    Example:
        freezeframe rules suggest bug-8821 --apply
    """


@rules.command(name="suggest")
@click.argument("cassette")
@store_options
@setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml]", "rules_file", metavar="FILE"
)
@click.option(
    "--apply",
    is_flag=True,
    help="Add the suggested rules to the rules file, after showing what rekey would change.",
)
@JSON
@debug_option
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
    path = located().data_dir / RULES_FILENAME
    if rules_file:
        path = Path(rules_file).expanduser()
    with open_store() as opened:
        found = suggesting.suggestions_of(opened, cassette)
        planned = None
        if apply and found:
            current = path.read_text(encoding="utf-8") if path.is_file() else ""
            planned = suggesting.preview(opened, cassette, found, current, str(path), key_config_of)
    if not as_json:
        echo(suggesting.suggestion_lines(cassette, found, planned))
    if planned is not None:
        suggesting.write_rules(path, planned)
        inform(f"added {len(found)} rules to {path}; run `freezeframe rekey {cassette}` to re-key")
    if as_json:
        document: dict[str, Any] = {"suggestions": [s.document() for s in found]}
        if planned is not None:
            document["applied"] = suggesting.applied_document(path, planned)
        emit_json(document)
