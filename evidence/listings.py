"""What the command line prints for people: the tables and lines of ``ls``, ``show``,
``search``, ``diff``, ``triage`` and ``verify``.

Every value read from a recording is made inert here (``inert``), and every table cell is
escaped for rich's markup, so that the command line only prints what it is handed. The
JSON documents these sit beside are ``evidence.document``'s. rich is imported by the tables
alone, when there is one to print: ``show 3`` and ``diff`` print lines without it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from freezeframe.evidence.inert import inert
from freezeframe.evidence.words import plural, size, when
from freezeframe.storage import (
    CassetteSummary,
    ExchangeSummary,
    Miss,
    Note,
    SearchHit,
    VerifyReport,
)

if TYPE_CHECKING:
    from rich.table import Table

    from freezeframe.evidence.compare import RunDiff
    from freezeframe.evidence.triage import Group


def said(line: str) -> str:
    """A line that carries recorded text, which must not command the terminal."""
    return inert(line, newlines=False)


def cell(text: str) -> str:
    """A table cell of recorded text: inert, and never read as rich markup."""
    from rich.markup import escape

    return escape(inert(text, newlines=False))


def cassettes_table(rows: Sequence[CassetteSummary]) -> Table:
    """``ls``: name, exchanges, first and last time, size stored."""
    from rich.table import Table

    table = Table("cassette", "exchanges", "first", "last", "stored")
    for row in rows:
        table.add_row(
            row.name,
            str(row.exchanges),
            when(row.first_at),
            when(row.last_at),
            size(row.stored_bytes),
        )
    return table


def exchanges_table(rows: Sequence[ExchangeSummary]) -> Table:
    """The list of ``show``; the model, tokens and drift columns appear when some row has
    them."""
    from rich.table import Table

    from freezeframe.evidence.windows import token_counts

    models = [str(r.facts.get("answered_model") or r.facts.get("model") or "-") for r in rows]
    with_model = any(model != "-" for model in models)
    tokens = []
    for row in rows:
        usage = row.facts.get("usage")
        counted = token_counts(usage) if isinstance(usage, dict) else (None, None)
        tokens.append("-" if counted == (None, None) else "/".join(str(n or 0) for n in counted))
    with_tokens = any(shown != "-" for shown in tokens)
    with_drift = any(row.drifted for row in rows)
    with_origin = any(row.origin for row in rows)
    table = Table("seq", "started", "method", "status", "outcome", "ms", "bytes")
    if with_model:
        table.add_column("model", overflow="fold")
    if with_tokens:
        table.add_column("tokens in/out", justify="right")
    if with_drift:
        table.add_column("drift", justify="right")
    if with_origin:
        table.add_column("origin")
    table.add_column("url", overflow="fold")
    for row, model, used in zip(rows, models, tokens, strict=True):
        cells = [
            str(row.seq),
            when(row.started_at),
            row.method,
            str(row.status) if row.status is not None else "-",
            row.outcome.value,
            f"{row.duration * 1000:.0f}" if row.duration is not None else "-",
            str(row.response_bytes),
        ]
        cells += [model] if with_model else []
        cells += [used] if with_tokens else []
        cells += [str(row.drifted) if row.drifted else "-"] if with_drift else []
        cells += [row.origin or "-"] if with_origin else []
        table.add_row(*(cell(text) for text in cells), cell(row.url))
    return table


def notes_lines(notes: Sequence[Note]) -> Iterator[str]:
    """Case notes under what ``show`` printed; nothing when there are none."""
    if notes:
        yield "== notes"
    for n in notes:
        about = "" if n.seq is None else f" #{n.seq}"
        yield said(f"{when(n.at)}{about}  {n.text}")


def misses_lines(cassette: str, found: Sequence[Miss]) -> Iterator[str]:
    """``show --misses``: what replay could not answer, and why."""
    if not found:
        yield f"no misses kept for cassette {cassette!r}"
    for miss in found:
        yield said(f"{when(miss.at)}  {miss.method} {miss.url}")
        yield said(f"  {miss.message}")


def unused_lines(cassette: str, document: dict[str, Any] | None) -> Iterator[str]:
    """``show --unused``: what the last replay never asked for, or asked out of order."""
    if document is None:
        yield f"no replay of {cassette!r} has kept its tape (exec --mode replay keeps it)"
        return
    yield f"the last replay of {cassette!r} ended {when(document['at'])}:"
    for row in document["unused"]:
        yield said(f"  never asked for: #{row['seq']} {row['method']} {row['url']}")
    for row in document["out_of_order"]:
        yield said(
            f"  out of order: #{row['seq']} {row['method']} {row['url']} (after #{row['after']})"
        )
    if not document["unused"] and not document["out_of_order"]:
        yield "  every recorded exchange was asked for, in order"


def search_lines(
    query: str, cassette: str | None, hits: Sequence[SearchHit], noted: Sequence[Note]
) -> Iterator[str]:
    """``search``'s notes found, or that nothing was; its table is ``search_table``."""
    for n in noted:
        yield said(
            f"note on {n.cassette}" + ("" if n.seq is None else f" #{n.seq}") + f": {n.text}"
        )
    if not hits and not noted:
        within = f" in cassette {cassette!r}" if cassette is not None else ""
        yield said(f"nothing found for {query!r}{within}")


def search_table(hits: Sequence[SearchHit]) -> Table:
    """``search``'s exchanges, newest first."""
    from rich.table import Table

    table = Table("cassette", "seq", "started", "method", "status", "in", "match", "url")
    for hit in hits:
        table.add_row(
            hit.cassette,
            str(hit.seq),
            when(hit.started_at),
            hit.method,
            str(hit.status) if hit.status is not None else "-",
            ", ".join(hit.parts),
            cell(hit.match),
            cell(hit.url),
        )
    return table


def diff_lines(compared: RunDiff) -> Iterator[str]:
    """``diff``: where two runs diverge, then each step and what differs in it."""
    first = compared.first_divergence
    if first is None:
        yield f"{compared.a} and {compared.b} are equivalent, step for step"
    else:
        pair = compared.steps[first]
        where = (
            f"#{pair.a if pair.a is not None else '-'} / #{pair.b if pair.b is not None else '-'}"
        )
        yield said(
            f"{compared.a} and {compared.b} diverge at step {first + 1} ({where}): {pair.title}"
        )
    for n, pair in enumerate(compared.steps, start=1):
        left = f"#{pair.a}" if pair.a is not None else "-"
        right = f"#{pair.b}" if pair.b is not None else "-"
        mark = "≠" if pair.diverges else "="
        alone = " (only in A)" if pair.b is None else " (only in B)" if pair.a is None else ""
        yield said(f"{n:>3} {left:>5} {mark} {right:<5} {pair.kind:<5} {pair.title}{alone}")
        for kind, changes in (
            ("request", pair.request),
            ("answer", pair.answer),
            ("metadata", pair.metadata),
            ("timing", pair.timing),
        ):
            for change in changes:
                yield said(f"      {kind} {change.what}: {change.a} -> {change.b}")


def groups_lines(
    found: Sequence[Group], numbered: dict[str, int], width: int | None
) -> Iterator[str]:
    """triage's listing, as the /triage page has it: a group's number (what ``recheck``
    takes), counts, kind, times and first failure on one line, and its signature whole
    below, wrapped to ``width`` (None: a pipe, whole lines; a table column cut it to ten
    characters)."""
    for group in found:
        head = said(
            f"#{numbered.get(group.signature, '-')}  {plural(group.count, 'failure')} in "
            f"{plural(len(group.runs), 'run')} · {when(group.first_seen)} – "
            f"{when(group.last_seen)} · first: {group.example.cassette} {group.example.seq}"
        )
        signature = said(group.signature)
        if width is None:
            yield f"{head}\n    {signature}"
            continue
        yield from textwrap.wrap(head, width, subsequent_indent="      ")
        for line in textwrap.wrap(signature, width - 4):
            yield f"    {line}"


def verify_lines(cassette: str, report: VerifyReport) -> Iterator[str]:
    """``verify`` of an intact chain: its head, and what a fork was forked from."""
    yield f"{cassette}: intact ({report.checked} exchanges), chain head {report.head}"
    for line in report.provenance:
        yield f"  {line}"


def rebuilt_line(unsigned: int, rebuilt: int, cassettes: int) -> str:
    """``triage --rebuild``: how many exchanges had no signature, and how many were read."""
    from freezeframe.evidence.signatures import SIGNATURE_VERSION

    return (
        f"worked out the signatures of {plural(unsigned, 'exchange')} that had none "
        f"under the current rules (v{SIGNATURE_VERSION}), reading all "
        f"{plural(rebuilt, 'exchange')} of their {plural(cassettes, 'cassette')}"
    )


def unsigned_line(stale: int) -> str:
    """``triage`` without ``--rebuild``: the exchanges its groups leave out, and why."""
    from freezeframe.evidence.signatures import SIGNATURE_VERSION

    return (
        f"{plural(stale, 'exchange')} {'has' if stale == 1 else 'have'} no signature under "
        f"the current rules (v{SIGNATURE_VERSION}); run `freezeframe triage --rebuild` to "
        "include them"
    )
