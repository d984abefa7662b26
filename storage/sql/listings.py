"""The listings: cassettes and exchanges as summaries, optionally filtered, and drift.

A filter (storage.records.ExchangeFilter) becomes conditions on the ``exchanges``
row alone: the run id, the models and the status each have a column, so filtering
needs no blob and no JSON. Listings run on the admin app's and the CLI's threads,
never on the replay path. The unfiltered cassette list reads ``cassette_totals``, each
cassette's figures as of the chain head they were counted at, and counts again only the
cassettes whose head has moved; the store keeps those new totals for the next listing.
"""

import json
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    union,
)

from freezeframe.storage.records import (
    FACT_KINDS,
    CassetteSummary,
    Drift,
    ExchangeFilter,
    ExchangeSummary,
    Outcome,
    RunOverview,
)
from freezeframe.storage.sql.rows import stored_map, to_summary
from freezeframe.storage.sql.schema import blobs, cassette_totals, cassettes, drifts, exchanges

_IN_CASSETTE = cassettes.c.name == bindparam("cassette")

_BAD = (Outcome.TRUNCATED.value, Outcome.FAILED.value, Outcome.INCOMPLETE.value)
_FAILED = or_(exchanges.c.status >= 400, exchanges.c.outcome.in_(_BAD))
"""An exchange that failed: an error status, or no whole answer (RunOverview.failed)."""

_SUMMARY_COLUMNS = (
    "seq",
    "occurrence",
    "key",
    "method",
    "scheme",
    "host",
    "port",
    "path",
    "status",
    "outcome",
    "started_at",
    "duration",
    "first_byte_at",
    "response_bytes",
    "context",
    "message_count",
    "origin",
    *FACT_KINDS,
)

_DRIFTED = (
    select(func.count(drifts.c.id))
    .where(drifts.c.cassette_id == exchanges.c.cassette_id, drifts.c.seq == exchanges.c.seq)
    .scalar_subquery()
    .label("drifted")
)

_SUMMARIES = (
    select(*(exchanges.c[name] for name in _SUMMARY_COLUMNS), _DRIFTED)
    .join_from(exchanges, cassettes)
    .where(_IN_CASSETTE)
    .order_by(exchanges.c.seq)
)

_DRIFTS = (
    select(drifts.c.at, drifts.c.paths, drifts.c.context)
    .join_from(drifts, cassettes)
    .where(_IN_CASSETTE, drifts.c.seq == bindparam("seq"))
    .order_by(drifts.c.at, drifts.c.id)
)


def matching(where: ExchangeFilter | None) -> list[ColumnElement[bool]]:
    """The conditions an exchanges row meets when it matches ``where``."""
    if where is None:
        return []
    conditions: list[ColumnElement[bool]] = []
    if where.run_id is not None:
        conditions.append(exchanges.c.run_id == where.run_id)
    if where.host is not None:
        conditions.append(exchanges.c.host == where.host)
    if where.model is not None:
        conditions.append(
            or_(exchanges.c.model == where.model, exchanges.c.answered_model == where.model)
        )
    if isinstance(where.status, str):
        conditions.append(exchanges.c.outcome == where.status)
    elif where.status is not None:
        conditions.append(exchanges.c.status == where.status)
    return conditions


def exchange_summaries(
    conn: Connection,
    cassette: str,
    where: ExchangeFilter | None,
    offset: int = 0,
    limit: int | None = None,
) -> list[ExchangeSummary]:
    """The cassette's exchanges that match ``where``, in seq order; a page of them with
    ``limit``."""
    query = _SUMMARIES.where(*matching(where))
    if limit is not None:
        query = query.offset(offset).limit(limit)
    rows = conn.execute(query, {"cassette": cassette}).mappings()
    return [to_summary(row, cassette) for row in rows]


def run_overview(conn: Connection, cassette: str, where: ExchangeFilter | None) -> RunOverview:
    """The figures of the matching exchanges, counted by the database: one aggregate per
    outcome, per origin kind and per host, and the drift notes on them."""
    chosen = select(exchanges).join_from(exchanges, cassettes).where(_IN_CASSETTE, *matching(where))
    rows = chosen.subquery()
    params = {"cassette": cassette}
    by_outcome = {
        outcome: count
        for outcome, count in conn.execute(
            select(rows.c.outcome, func.count()).group_by(rows.c.outcome), params
        )
    }
    by_origin: dict[str, int] = {}
    for origin in conn.scalars(select(rows.c.origin).where(rows.c.origin.is_not(None)), params):
        kind = json.loads(origin)["kind"]  # each origin is its own (it names a chain value)
        by_origin[kind] = by_origin.get(kind, 0) + 1
    hosts = tuple(conn.scalars(select(rows.c.host).distinct().order_by(rows.c.host), params))
    end = rows.c.started_at + func.coalesce(rows.c.duration, 0.0)
    first, last = conn.execute(select(func.min(rows.c.started_at), func.max(end)), params).one()
    drifted = conn.scalar(
        select(func.count(drifts.c.id)).join(
            rows, (drifts.c.cassette_id == rows.c.cassette_id) & (drifts.c.seq == rows.c.seq)
        ),
        params,
    )
    failed = conn.scalar(
        select(func.count()).where(or_(rows.c.status >= 400, rows.c.outcome.in_(_BAD))), params
    )
    return RunOverview(
        failed=failed or 0,
        exchanges=sum(by_outcome.values()),
        by_outcome=dict(sorted(by_outcome.items())),
        drifted=drifted or 0,
        by_origin=dict(sorted(by_origin.items())),
        hosts=hosts,
        first_at=first,
        last_end=last,
    )


def cassette_summaries(conn: Connection, where: ExchangeFilter | None) -> list[CassetteSummary]:
    """Every cassette, by name; with a filter, only those with a matching exchange, and
    every figure (count, times, stored bytes) of the matching exchanges alone."""
    conditions = matching(where)
    tables: Any = cassettes.join(exchanges) if conditions else cassettes.outerjoin(exchanges)
    totals = (
        select(
            cassettes.c.id,
            cassettes.c.name,
            func.count(exchanges.c.id).label("exchanges"),
            func.min(exchanges.c.started_at).label("first_at"),
            func.max(exchanges.c.started_at).label("last_at"),
        )
        .select_from(tables)
        .where(*conditions)
        .group_by(cassettes.c.id, cassettes.c.name)
    )
    rows = conn.execute(totals).mappings().all()
    stored = _stored_bytes(conn, conditions)
    summaries = [
        CassetteSummary(
            name=row["name"],
            exchanges=row["exchanges"],
            first_at=row["first_at"],
            last_at=row["last_at"],
            stored_bytes=stored.get(row["id"], 0),
        )
        for row in rows
    ]
    return sorted(summaries, key=lambda summary: summary.name)


def counted_summaries(conn: Connection) -> tuple[list[CassetteSummary], list[dict[str, Any]]]:
    """Every cassette, by name, from the totals counted at its current head, and the totals
    counted afresh here for the cassettes whose head has moved (for save_totals)."""
    rows = conn.execute(
        select(
            cassettes.c.id,
            cassettes.c.name,
            cassettes.c.head,
            cassette_totals.c.head.label("counted_at"),
            cassette_totals.c.exchanges,
            cassette_totals.c.first_at,
            cassette_totals.c.last_at,
            cassette_totals.c.stored_bytes,
            cassette_totals.c.failed,
        ).outerjoin_from(
            cassettes, cassette_totals, cassette_totals.c.cassette_id == cassettes.c.id
        )
    ).mappings()
    known: dict[int, dict[str, Any]] = {}
    names: dict[int, str] = {}
    for row in rows:
        names[row["id"]] = row["name"]
        if row["counted_at"] == row["head"] and row["failed"] is not None:
            known[row["id"]] = dict(row)
    fresh = [_count(conn, cassette_id, head) for cassette_id, head in _moved(conn, known, names)]
    for totals in fresh:
        known[totals["cassette_id"]] = totals
    summaries = [
        CassetteSummary(
            name=names[cassette_id],
            exchanges=totals["exchanges"],
            first_at=totals["first_at"],
            last_at=totals["last_at"],
            stored_bytes=totals["stored_bytes"],
            failed=totals["failed"],
        )
        for cassette_id, totals in known.items()
    ]
    return sorted(summaries, key=lambda summary: summary.name), fresh


def save_totals(conn: Connection, fresh: list[dict[str, Any]]) -> None:
    """Keep totals counted by counted_summaries for the next listing."""
    ids = [totals["cassette_id"] for totals in fresh]
    conn.execute(delete(cassette_totals).where(cassette_totals.c.cassette_id.in_(ids)))
    conn.execute(insert(cassette_totals), fresh)


def _moved(
    conn: Connection, known: dict[int, dict[str, Any]], names: dict[int, str]
) -> list[tuple[int, str]]:
    missing = [cassette_id for cassette_id in names if cassette_id not in known]
    if not missing:
        return []
    return [
        (cassette_id, head)
        for cassette_id, head in conn.execute(
            select(cassettes.c.id, cassettes.c.head).where(cassettes.c.id.in_(missing))
        )
    ]


def _count(conn: Connection, cassette_id: int, head: str) -> dict[str, Any]:
    """One cassette's totals, as ``ls`` shows them, at ``head``."""
    own = [exchanges.c.cassette_id == cassette_id]
    count, first, last, failed = conn.execute(
        select(
            func.count(exchanges.c.id),
            func.min(exchanges.c.started_at),
            func.max(exchanges.c.started_at),
            func.count(exchanges.c.id).filter(_FAILED),
        ).where(*own)
    ).one()
    return {
        "cassette_id": cassette_id,
        "head": head,
        "exchanges": count,
        "first_at": first,
        "last_at": last,
        "stored_bytes": _stored_bytes(conn, own).get(cassette_id, 0),
        "failed": failed,
    }


def _stored_bytes(conn: Connection, conditions: list[ColumnElement[bool]]) -> dict[int, int]:
    """The stored size of the bodies each cassette's matching exchanges hold."""
    # UNION, not UNION ALL: a body used twice in a cassette is stored once.
    uses = union(
        *(
            select(exchanges.c.cassette_id, column.label("digest")).where(*conditions)
            for column in (
                exchanges.c.request_body_digest,
                exchanges.c.response_body_digest,
                exchanges.c.messages_digest,
            )
        )
    ).subquery()
    sizes = (
        select(uses.c.cassette_id, func.sum(blobs.c.stored_size))
        .join_from(uses, blobs, uses.c.digest == blobs.c.digest)
        .group_by(uses.c.cassette_id)
    )
    return {cassette_id: int(size) for cassette_id, size in conn.execute(sizes)}


def drift_of(conn: Connection, cassette: str, seq: int) -> tuple[Drift, ...]:
    """The drift noted on one exchange, oldest first."""
    return tuple(
        Drift(
            at=at,
            paths=tuple(json.loads(paths)),
            context=stored_map({"seq": seq, "context": context}, "context"),
        )
        for at, paths, context in conn.execute(_DRIFTS, {"cassette": cassette, "seq": seq})
    )
