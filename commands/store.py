"""The commands that look after the store: ``rm`` a cassette, ``gc`` what no cassette
uses, ``blobs move`` bodies into object storage and back (docs/production.md).
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import click

from freezeframe.commands.context import open_store
from freezeframe.commands.options import JSON, debug_option, store_options, usage
from freezeframe.commands.output import emit_json
from freezeframe.proxy import settings as settings_module
from freezeframe.storage.names import validate_cassette_name


@click.command(name="rm")
@click.argument("cassette")
@store_options
@click.option("--yes", is_flag=True, help="Do not ask; needed when not on a terminal.")
@JSON
@debug_option
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
    with open_store() as opened:
        if not yes:
            asked = f"cassette {cassette!r} ({plural(len(opened.exchanges(cassette)), 'exchange')})"
            if not sys.stdin.isatty():
                raise ValueError(
                    f"rm would remove {asked}; pass --yes to do it without a terminal to ask on"
                )
            click.confirm(f"remove {asked}?", abort=True)
        removed = opened.remove(cassette)
    if as_json:
        emit_json(asdict(removed))
        return
    click.echo(
        f"removed cassette {cassette!r}: {plural(removed.exchanges, 'exchange')}, "
        f"{plural(removed.bodies, 'body')} ({size(removed.freed)}) that no other cassette used"
    )


@click.command()
@store_options
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@click.option(
    "--grace",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="Leave bodies stored more recently than this (an exchange may still name them).",
)
@JSON
@debug_option
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

    with usage():
        seconds = settings_module.parse_duration(grace, "--grace")
    with open_store() as opened:
        found = opened.collect(seconds, dry_run=dry_run)
    if as_json:
        emit_json(asdict(found) | {"dry_run": dry_run})
        return
    verb = "would remove" if dry_run else "removed"
    objects = f", and {found.objects} objects in object storage" if found.objects else ""
    click.echo(
        f"{verb} {found.bodies} bodies no cassette uses ({size(found.freed)}) "
        f"and {found.values} search values{objects}"
    )


@click.group()
def blobs() -> None:
    """Bodies in object storage (--blobs s3://BUCKET[/PREFIX]): move them there and back.

    \b
    Example:
        freezeframe blobs move --to s3://traffic/freezeframe
    """


@blobs.command("move")
@store_options
@click.option(
    "--to",
    "target",
    required=True,
    metavar="s3://BUCKET[/PREFIX]|sql",
    help="Where the bodies go: an object store, or back into the SQL store (sql).",
)
@debug_option
def blobs_move(target: str) -> None:
    """Move a store's bodies into object storage, or back into the SQL store.

    One body at a time, so proxies may keep recording meanwhile, and a move stopped half
    way can be run again. Run proxies with --blobs set to the same URL from then on.

    \b
    Example:
        freezeframe blobs move --to s3://traffic/freezeframe
        freezeframe blobs move --to sql --blobs s3://traffic/freezeframe
    """
    with open_store() as opened:
        moved = opened.move_bodies(target)
    where = "the SQL store" if target == "sql" else target
    click.echo(f"moved {moved} bodies into {where}")
