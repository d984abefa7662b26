"""Triage's reads and writes: the signals stored with exchanges, and case notes.

Triage reads only the exchanges that have a failure or a trace (a partial index holds just
those), with their cassette's name and their run id: never a body. The signals themselves are
worked out above the store (evidence.signatures); here they are opaque text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Select, bindparam, delete, insert, null, or_, select, update

from freezeframe.storage.records import Note, RecheckResult, Signals, TapeRecord, TriageRow
from freezeframe.storage.sql.prepared import Prepared
from freezeframe.storage.sql.rows import signal_columns
from freezeframe.storage.sql.schema import (
    ExactText,
    cassettes,
    exchanges,
    notes,
    rechecks,
    tapes,
)

BATCH = 500
"""Exchanges whose signals one statement rewrites."""


def _rows(traces: bool) -> Select[Any]:
    e = exchanges.c
    wanted = [e.failure_kind.is_not(None), e.run_failures.is_not(None)]
    if traces:
        wanted.append(e.trace.is_not(None))
    return (
        select(
            e.cassette_id,
            e.seq,
            e.run_id,
            e.started_at,
            e.failure_kind,
            e.signature,
            e.trace if traces else null().label("trace"),
            e.run_failures,
        )
        .where(or_(*wanted))
        .order_by(e.cassette_id, e.seq)
    )


def triage_rows(
    conn: Connection, since: float | None, names: Sequence[str] | None, traces: bool = False
) -> list[TriageRow]:
    """The failing exchanges (with ``traces``, every model call too), of the cassettes
    ``names`` (all when None), started at ``since`` or later (any time when None), in
    cassette and seq order; run on the driver's cursor (storage.sql.prepared)."""
    named = {int(i): str(n) for i, n in conn.execute(select(cassettes.c.id, cassettes.c.name))}
    if names is not None:
        wanted = set(names)
        named = {i: n for i, n in named.items() if n in wanted}
    if not named:
        return []
    statement = _rows(traces).where(exchanges.c.started_at >= bindparam("since"))
    prepared = Prepared(statement, conn.dialect)
    cursor = conn.connection.cursor()
    try:
        found = prepared.all(cursor, {"since": -math.inf if since is None else since})
    finally:
        cursor.close()
    make = TriageRow._make
    return [make((name, *row[1:])) for row in found if (name := named.get(row[0])) is not None]


def unsigned(conn: Connection, version: int) -> Iterator[tuple[str, int]]:
    """(cassette, seq) of every exchange whose signals are missing or older than ``version``."""
    e = exchanges.c
    query = (
        select(cassettes.c.name, e.seq)
        .join(cassettes, cassettes.c.id == e.cassette_id)
        .where(or_(e.signature_version.is_(None), e.signature_version < version))
        .order_by(e.cassette_id, e.seq)
    )
    for name, seq in conn.execute(query):
        yield str(name), int(seq)


def store_signals(conn: Connection, cassette: str, signals: Mapping[int, Signals]) -> None:
    """Rewrite the signals of the cassette's exchanges ``signals`` names (by seq)."""
    cassette_id = conn.scalar(select(cassettes.c.id).where(cassettes.c.name == cassette))
    if cassette_id is None:
        return
    statement = (
        update(exchanges)
        .where(exchanges.c.cassette_id == cassette_id, exchanges.c.seq == bindparam("at_seq"))
        .values(
            failure_kind=bindparam("kind"),
            signature=bindparam("sig", type_=ExactText),
            trace=bindparam("tr"),
            signature_version=bindparam("version"),
            run_failures=bindparam("runs"),
        )
    )
    rows = []
    for seq, found in signals.items():
        columns = signal_columns(found)
        rows.append(
            {
                "at_seq": seq,
                "kind": columns["failure_kind"],
                "sig": columns["signature"],
                "tr": columns["trace"],
                "version": columns["signature_version"],
                "runs": columns["run_failures"],
            }
        )
    for start in range(0, len(rows), BATCH):
        conn.execute(statement, rows[start : start + BATCH])


def add_note(conn: Connection, note: Note) -> None:
    conn.execute(
        insert(notes).values(cassette=note.cassette, seq=note.seq, at=note.at, text=note.text)
    )


def keep_recheck(conn: Connection, result: RecheckResult) -> None:
    """``result`` in place of its group's last recheck."""
    conn.execute(delete(rechecks).where(rechecks.c.signature == result.signature))
    conn.execute(
        insert(rechecks).values(signature=result.signature, at=result.at, document=result.document)
    )


def list_rechecks(conn: Connection) -> dict[str, RecheckResult]:
    query = select(rechecks.c.signature, rechecks.c.at, rechecks.c.document)
    return {row.signature: RecheckResult(*row) for row in conn.execute(query)}


def keep_tape(conn: Connection, tape: TapeRecord) -> None:
    """``tape`` in place of its cassette's last."""
    conn.execute(delete(tapes).where(tapes.c.cassette == tape.cassette))
    conn.execute(insert(tapes).values(cassette=tape.cassette, at=tape.at, document=tape.document))


def read_tape(conn: Connection, cassette: str) -> TapeRecord | None:
    query = select(tapes.c.cassette, tapes.c.at, tapes.c.document)
    row = conn.execute(query.where(tapes.c.cassette == cassette)).first()
    return None if row is None else TapeRecord(*row)


def add_notes(conn: Connection, found: Iterable[Note]) -> None:
    for note in found:
        add_note(conn, note)


def list_notes(conn: Connection, cassette: str | None, seq: int | None = None) -> list[Note]:
    """The notes on ``cassette`` (every cassette when None), or on its exchange ``seq``,
    oldest first."""
    query = select(notes.c.cassette, notes.c.seq, notes.c.at, notes.c.text).order_by(
        notes.c.at, notes.c.id
    )
    if cassette is not None:
        query = query.where(notes.c.cassette == cassette)
    if seq is not None:
        query = query.where(notes.c.seq == seq)
    return [Note(*row) for row in conn.execute(query)]
