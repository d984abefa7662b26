"""Forks: a new cassette from another one's exchanges, with its provenance in its chain.

A what-if starts from the evidence as it was: a fork copies the source's exchanges (up to a
seq) into a new cassette, sharing their bodies, and an edited fork changes one answer on the
way. The source is never touched. What the fork came from is written twice where ``verify``
sees it: the cassette's chain starts from a link over its provenance (source, last seq, the
source's chain head at the time) instead of from GENESIS, and every copied exchange carries
its Origin (source cassette, seq and chain value), which its own chain link covers. So a fork
that verifies proves what it was forked from, and ``provenance`` says whether the source, if
this store still has it, holds those exchanges unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, insert, select, text, update

from freezeframe.storage import blobs, transcript
from freezeframe.storage.chain import GENESIS, exchange_digest, link
from freezeframe.storage.errors import CassetteNotFound, StoreError
from freezeframe.storage.records import Edit, Forked, ForkOrigin, Origin
from freezeframe.storage.search import answer_values, transcript_values
from freezeframe.storage.sql.bodies import form
from freezeframe.storage.sql.engine import insert_ignore
from freezeframe.storage.sql.rows import (
    blob_row,
    chain_fields,
    fact_columns,
    headers_json,
    json_text,
    origin_json,
    origin_of,
)
from freezeframe.storage.sql.schema import SIGNALS, cassettes, exchanges
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.sql.search import SearchIndex

_COPIED = tuple(column.name for column in exchanges.c if column.name not in {"id", "cassette_id"})


def start_of(origin: str | None) -> str:
    """The link a cassette's chain starts from: GENESIS, or a fork's link over its origin."""
    if origin is None:
        return GENESIS
    return link(GENESIS, exchange_digest({"origin": origin}))


def fork_origin_of(origin: str | None) -> ForkOrigin | None:
    """A cassette's stored origin as a record."""
    if origin is None:
        return None
    found = json.loads(origin)
    return ForkOrigin(found["cassette"], found["upto"], found["head"])


def origin_text(origin: ForkOrigin) -> str:
    """A cassette's origin as fork() stores it, and as its chain's start digests it."""
    return json_text({"cassette": origin.cassette, "upto": origin.upto, "head": origin.head})


def provenance(conn: Connection, cassette_id: int, origin: str | None) -> tuple[str, ...]:
    """What a fork says it came from, and whether the source still holds it unchanged."""
    if origin is None:
        return ()
    found = json.loads(origin)
    source, upto, head = found["cassette"], found["upto"], found["head"]
    copied = "every exchange" if upto is None else f"exchanges up to #{upto}"
    said = f"forked from {source!r} ({copied}; its chain then ended at {head})"
    source_id = conn.scalar(select(cassettes.c.id).where(cassettes.c.name == source))
    if source_id is None:
        return (said, f"{source!r} is not in this store: the fork's own chain is the record")
    wanted: dict[int, str] = {}
    for (stored,) in conn.execute(
        select(exchanges.c.origin).where(
            exchanges.c.cassette_id == cassette_id, exchanges.c.origin.is_not(None)
        )
    ):
        copied_from = origin_of(stored)
        if copied_from is not None and copied_from.cassette == source:
            wanted[copied_from.seq] = copied_from.chain
    held: dict[int, str] = {
        seq: chain
        for seq, chain in conn.execute(
            select(exchanges.c.seq, exchanges.c.chain).where(
                exchanges.c.cassette_id == source_id, exchanges.c.seq.in_(list(wanted))
            )
        )
    }
    changed = sorted(seq for seq, chain in wanted.items() if held.get(seq) != chain)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return (said, f"{source!r} no longer holds #{changed[0]} as it was forked{more}")
    return (said, f"{source!r} still holds all {len(wanted)} exchanges as they were forked")


def fork(
    conn: Connection,
    source: str,
    target: str,
    upto: int | None,
    edits: Mapping[int, Edit],
    where: str,
) -> Forked:
    """Copy ``source``'s exchanges (seq <= ``upto``) into the new cassette ``target``, each
    answer in ``edits`` replaced, in one transaction; the chain is computed afresh."""
    found = conn.execute(
        select(cassettes.c.id, cassettes.c.head).where(cassettes.c.name == source)
    ).first()
    if found is None:
        raise CassetteNotFound(source, where)
    source_id, source_head = found
    if conn.scalar(select(cassettes.c.id).where(cassettes.c.name == target)) is not None:
        raise StoreError(
            f"cassette {target!r} already exists in store {where}; a fork needs a new name "
            "(or freezeframe rm it first)"
        )
    query = select(exchanges).where(exchanges.c.cassette_id == source_id).order_by(exchanges.c.id)
    if upto is not None:
        query = query.where(exchanges.c.seq <= upto)
    rows = [dict(row) for row in conn.execute(query).mappings()]
    if not rows:
        raise StoreError(f"cassette {source!r} has no exchange up to #{upto} to fork")
    if missing := sorted(set(edits) - {row["seq"] for row in rows}):
        raise StoreError(f"cassette {source!r} has no exchange {missing[0]} to edit")
    origin = origin_text(ForkOrigin(source, upto, source_head))
    target_id = conn.execute(
        insert(cassettes)
        .values(name=target, created_at=time.time(), head=GENESIS, origin=origin)
        .returning(cassettes.c.id)
    ).scalar_one()
    previous = start_of(origin)
    copies = []
    for row in rows:
        edit = edits.get(row["seq"])
        copy = {name: row[name] for name in _COPIED} | {"cassette_id": target_id}
        copy["origin"] = origin_json(
            Origin(
                kind="forked" if edit is None else "edited",
                cassette=source,
                seq=row["seq"],
                chain=row["chain"],
                changes=() if edit is None else edit.changes,
            )
        )
        if edit is not None:
            # An edited answer's signals are the old answer's: dropped; ``edit`` signs the fork.
            copy |= _answer_columns(conn, edit) | dict.fromkeys(SIGNALS)
        canonical = form(conn, row["canonical_digest"]) if row["canonical_digest"] else None
        previous = link(previous, exchange_digest(chain_fields(copy, target, canonical)))
        copy["chain"] = previous
        copy_id = conn.execute(insert(exchanges).values(copy).returning(exchanges.c.id))
        copies.append((row["id"], copy_id.scalar_one(), edit))
    conn.execute(update(cassettes).where(cassettes.c.id == target_id).values(head=previous))
    _index_copies(conn, target_id, copies)
    return Forked(target, source, len(rows), upto, previous)


def _answer_columns(conn: Connection, edit: Edit) -> dict[str, Any]:
    """The columns of an answer as an edit gives it (whole: outcome complete), its body
    stored like any other, and the facts the caller worked out for the exchange with it."""
    response = edit.response
    digest = None
    if response.body:
        digest = blobs.digest(response.body)
        conn.execute(insert_ignore(conn.engine, blobs_table), [blob_row(digest, response.body)])
    ending: dict[str, Any] = {"outcome": "complete", "error": None}
    if edit.messages is not None:  # a WebSocket: its transcript edited, its ending kept
        encoded = transcript.encode(edit.messages)
        ending = {"messages_digest": blobs.digest(encoded)}
        conn.execute(
            insert_ignore(conn.engine, blobs_table), [blob_row(ending["messages_digest"], encoded)]
        )
    return (
        ending
        | {
            "status": response.status,
            "reason": response.reason,
            "response_http_version": response.http_version,
            "response_headers": headers_json(response.headers),
            "response_trailers": headers_json(response.trailers),
            "response_body_digest": digest,
            "response_bytes": len(response.body),
            "chunks": json_text([[chunk.offset, chunk.at] for chunk in response.chunks]),
            "first_byte_at": response.first_byte_at,
        }
        | fact_columns(edit.facts)
    )


def _index_copies(
    conn: Connection, target_id: int, copies: list[tuple[int, int, Edit | None]]
) -> None:
    """A copy is found by search as its source is; an edited answer by its own values."""
    edited = []
    for source_id, copy_id, edit in copies:
        skip = "" if edit is None else "AND part != 'response'"
        conn.execute(
            text(
                "INSERT INTO text_uses (text_id, exchange_id, part) "
                f"SELECT text_id, :copy, part FROM text_uses WHERE exchange_id = :source {skip}"
            ),
            {"copy": copy_id, "source": source_id},
        )
        if edit is not None:
            values = answer_values(edit.response)
            if edit.messages is not None:
                values += transcript_values(edit.messages, client=False)
            edited.append((copy_id, target_id, values))
    if edited:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            SearchIndex(conn.engine).add(cursor, edited)
        finally:
            cursor.close()
