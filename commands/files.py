"""The commands that move cassettes in and out of files: ``export`` (jsonl, a signed
bundle, HAR, OpenTelemetry, an eval data set), ``import`` (those and other tools' captures)
and ``keygen`` (the key pair a bundle is signed with). The formats are ``exchange_formats``.
"""

from __future__ import annotations

from pathlib import Path

import click

from freezeframe import exchange_formats
from freezeframe.commands.context import given_blobs, located, open_store
from freezeframe.commands.options import RULES, debug_option, setting, store_options
from freezeframe.commands.output import inform, progress, say
from freezeframe.proxy import settings as settings_module
from freezeframe.storage.names import validate_cassette_name


@click.command(name="export")
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
@store_options
@setting(
    "--rules",
    "With --format bundle: the key rules to carry in it  [default: <data dir>/rules.toml if it "
    "exists]",
    metavar="FILE",
)
@debug_option
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

    rules_file = rules_path(rules, located().data_dir)
    with (
        open_store() as opened,
        progress(f"exporting {cassette}", len(opened.exchanges(cassette))) as advance,
    ):
        if otlp_endpoint is not None:
            spans = exchange_formats.send_otel(opened, cassette, otlp_endpoint, advance)
            say(f"{otlp_endpoint}: sent {spans} spans")
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


@click.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--as", "name", metavar="NAME", help="The new cassette's name  [default: the file's]")
@store_options
@RULES
@debug_option
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
    place = located()

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
            lambda: place.open_or_make(given_blobs()),
            lambda total: progress(f"importing {file.name}", total),
        )
    except BaseException:
        made_here.undo()
        raise
    if made is not None:  # said once the import held: a refused file's error stays the one line
        inform(f"made a new store at {made}")
    say(
        f"{imported.cassette}: imported {imported.exchanges} exchanges from {file} "
        f"({source.format}), chain head {imported.head}"
    )
    for note in source.notes:
        say(f"  {note}")


@click.command()
@click.option(
    "-o",
    "--output",
    "name",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="NAME",
    help="Writes NAME.key (mode 0600) and NAME.pub.",
)
@debug_option
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
