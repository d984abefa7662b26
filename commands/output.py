"""What a command writes: its output on stdout, notes and errors on stderr, its logs.

stdout is the command's output (lines for people, a rich table, or one JSON document);
everything else is one line on stderr. Lines that may carry recorded text are made inert
(``evidence.inert``), so a recording cannot command the terminal it is read on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

import click

from freezeframe.evidence.inert import inert

PIPED_WIDTH = 200
"""Columns of a table printed to a pipe or file, where no terminal says how wide to be."""


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr; it may quote what the user or a recording said, so it is inert."""
    click.echo(f"freezeframe: error: {inert(message, newlines=False)}", err=True)
    sys.exit(code)


def inform(message: str) -> None:
    """One line on stderr that is not an error; stdout stays the command's output."""
    click.echo(f"freezeframe: {inert(message, newlines=False)}", err=True)


def say(line: str) -> None:
    """A line that carries recorded text, which must not command the terminal."""
    click.echo(inert(line, newlines=False))


def echo(lines: Iterable[str], headings: bool = False) -> None:
    """Lines a library function made for people; section headings (``== ``) in bold on a
    terminal when ``headings`` (click drops the styling in a pipe)."""
    for line in lines:
        bold = headings and line.startswith("== ")
        click.echo(click.style(line, bold=True) if bold else line)


def emit_json(document: Any) -> None:
    """The one JSON document of ``--json``: what is not JSON (a time, a path) as its text."""
    click.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))


def rich_console() -> Any:
    """A rich console at the terminal's own width; piped output as wide as a table needs,
    never cut to 80."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPED_WIDTH)
    return console


class InertFormatter(logging.Formatter):
    """Log lines carry recorded text (URLs, errors, run ids): never a terminal command."""

    def format(self, record: logging.LogRecord) -> str:
        return inert(super().format(record))


def configure_logging(debug: bool) -> None:
    """For the commands that run a proxy: its log on stderr, inert; mitmproxy's from warnings
    up unless ``--debug``, the chattiest libraries' (hpack, asyncio, ...) always."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(InertFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=[handler])
    logging.getLogger("mitmproxy").setLevel(logging.DEBUG if debug else logging.WARNING)
    for noisy in ("hpack", "passlib", "asyncio", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@contextlib.contextmanager
def progress(what: str, total: int | None) -> Iterator[Callable[[int], None]]:
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
