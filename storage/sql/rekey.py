"""Rewriting a cassette's keys in place, and re-chaining it.

A rekey happens in two steps, so that the callback computing the new keys (which
may be slow) runs while the database is free for other cassettes' writers:

1. SqlStore.rekey verifies the chain, reads each exchange and calls the callback;
   plan() then numbers the occurrences of each new key in seq order.
2. the store's writer (a Rekey job, storage.sql.jobs) has apply() write the plan in one
   transaction that holds the cassette: it first
   re-computes the chain as it stands from what the store read in step 1, so that a
   cassette changed in between is refused rather than re-chained over; then moves
   the rows whose key or occurrence changes out of the way (negative occurrences,
   which no recording has) so the (cassette, key, occurrence) constraint never sees
   two rows at once, writes the new keys, forms and chain values, and the head.

Rows keep their ids, seqs and bodies; canonical forms are stored as blobs, as the
writer stores them. Forms no exchange uses any more stay in ``blobs``, like any body.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, select, update

from freezeframe.storage import blobs
from freezeframe.storage.chain import GENESIS, exchange_digest, link
from freezeframe.storage.errors import StoreError
from freezeframe.storage.jobs import Planned
from freezeframe.storage.records import KeyChange
from freezeframe.storage.sql.engine import insert_ignore
from freezeframe.storage.sql.rows import blob_row, chain_fields, stripped_json
from freezeframe.storage.sql.schema import CHAINED, cassettes, exchanges
from freezeframe.storage.sql.schema import blobs as blobs_table


def plan(planned: Iterable[Planned]) -> list[KeyChange]:
    """Each exchange's move, given in seq order: occurrences counted per new key."""
    taken: dict[str, int] = {}
    changes = []
    for entry in planned:
        key = entry.rekeyed.key
        occurrence = taken.get(key, 0)
        taken[key] = occurrence + 1
        changes.append(KeyChange(entry.seq, entry.key, key, entry.occurrence, occurrence))
    return changes


_ROWS = (
    select(exchanges.c.id, exchanges.c.chain, exchanges.c.canonical_digest, *CHAINED)
    .where(exchanges.c.cassette_id == bindparam("cassette_id"))
    .order_by(exchanges.c.id)
)

_PARK = (
    update(exchanges)
    .where(exchanges.c.id == bindparam("row_id"))
    .values(occurrence=bindparam("parked"))
)

_REWRITE = (
    update(exchanges)
    .where(exchanges.c.id == bindparam("row_id"))
    .values(
        key=bindparam("new_key"),
        key_scheme=bindparam("new_key_scheme"),
        occurrence=bindparam("new_occurrence"),
        canonical=bindparam("new_canonical"),
        canonical_digest=bindparam("new_canonical_digest"),
        stripped=bindparam("new_stripped"),
        chain=bindparam("new_chain"),
    )
)


def apply(
    conn: Connection,
    engine: Engine,
    cassette: str,
    planned: Mapping[int, Planned],
    changes: Mapping[int, KeyChange],
) -> None:
    """Write a plan in ``conn``'s transaction (storage.sql.engine.exclusive). Raises
    StoreError, having written nothing, when the cassette is not as it was read."""
    lock = select(cassettes.c.id, cassettes.c.head).where(cassettes.c.name == cassette)
    if engine.dialect.name == "postgresql":
        lock = lock.with_for_update()
    found = conn.execute(lock).first()
    changed = StoreError(
        f"cassette {cassette!r} changed while it was being rekeyed; nothing was rewritten: "
        "stop what writes to it and run rekey again"
    )
    if found is None:
        raise changed
    cassette_id, head = found
    rows = conn.execute(_ROWS, {"cassette_id": cassette_id}).mappings().all()
    if sorted(row["seq"] for row in rows) != sorted(planned):
        raise changed

    before, after = GENESIS, GENESIS
    forms: dict[str, bytes] = {}
    parked: list[dict[str, Any]] = []
    rewritten: list[dict[str, Any]] = []
    for row in rows:
        entry, change = planned[row["seq"]], changes[row["seq"]]
        before = link(before, exchange_digest(chain_fields(row, cassette, entry.canonical)))
        if before != row["chain"]:
            raise changed
        new = entry.rekeyed
        fields = dict(row) | {
            "key": new.key,
            "key_scheme": new.key_scheme,
            "occurrence": change.new_occurrence,
        }
        after = link(after, exchange_digest(chain_fields(fields, cassette, new.canonical)))
        form = blobs.digest(new.canonical) if new.canonical else None
        if form is not None:
            forms[form] = new.canonical
        values = {
            "row_id": row["id"],
            "new_key": new.key,
            "new_key_scheme": new.key_scheme,
            "new_occurrence": change.new_occurrence,
            "new_canonical": b"",
            "new_canonical_digest": form,
            "new_stripped": stripped_json(new.stripped),
            "new_chain": after,
        }
        rewritten.append(values)
        if (change.old_key, change.old_occurrence) != (change.new_key, change.new_occurrence):
            parked.append({"row_id": row["id"], "parked": -1 - row["seq"]})
    if before != head:
        raise changed

    if forms:
        conn.execute(insert_ignore(engine, blobs_table), [blob_row(n, f) for n, f in forms.items()])
    if parked:
        conn.execute(_PARK, parked)
    if rewritten:
        conn.execute(_REWRITE, rewritten)
    conn.execute(update(cassettes).where(cassettes.c.id == cassette_id).values(head=after))
