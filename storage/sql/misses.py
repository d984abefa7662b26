"""Replay's misses: one row each, written by the writer thread, listed newest first."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, RowMapping, select

from freezeframe.storage.records import Difference, Miss, Nearest
from freezeframe.storage.sql.rows import json_text, stored_map
from freezeframe.storage.sql.schema import misses

MISS_COLUMNS = (
    "cassette",
    "at",
    "kind",
    "method",
    "url",
    "key",
    "occurrence",
    "recorded",
    "message",
    "context",
    "nearest",
)


def miss_row(miss: Miss) -> dict[str, Any]:
    return {
        "cassette": miss.cassette,
        "at": float(miss.at),
        "kind": miss.kind,
        "method": miss.method,
        "url": miss.url,
        "key": miss.key,
        "occurrence": miss.occurrence,
        "recorded": miss.recorded,
        "message": miss.message,
        "context": json_text(dict(miss.context)),
        "nearest": json_text(
            [
                {
                    "seq": near.seq,
                    "request": near.request,
                    "key": near.key,
                    "differences": [
                        {"path": d.path, "live": d.live, "recorded": d.recorded}
                        for d in near.differences
                    ],
                }
                for near in miss.nearest
            ]
        ),
    }


def list_misses(conn: Connection, cassette: str | None, limit: int) -> list[Miss]:
    """The misses of ``cassette`` (of every cassette when None), newest first."""
    query = select(*(misses.c[name] for name in MISS_COLUMNS)).order_by(
        misses.c.at.desc(), misses.c.id.desc()
    )
    if cassette is not None:
        query = query.where(misses.c.cassette == cassette)
    return [_miss(row) for row in conn.execute(query.limit(limit)).mappings()]


def _miss(row: RowMapping) -> Miss:
    return Miss(
        cassette=row["cassette"],
        at=row["at"],
        kind=row["kind"],
        method=row["method"],
        url=row["url"],
        key=row["key"],
        occurrence=row["occurrence"],
        recorded=row["recorded"],
        message=row["message"],
        context=stored_map(row, "context"),
        nearest=tuple(
            Nearest(
                seq=near["seq"],
                request=near["request"],
                key=near["key"],
                differences=tuple(Difference(**d) for d in near["differences"]),
            )
            for near in json.loads(row["nearest"])
        ),
    )
