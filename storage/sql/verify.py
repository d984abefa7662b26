"""Re-compute a cassette's hash chain from what the database holds now.

Rows are read in insertion (id) order together with the cassette's head, in one
statement so that they come from one snapshot even while the writer is adding
rows. Bodies are re-read from the database and re-hashed, never taken from a
cache, since the point is to notice a body changed after it was cached; a streamed
body is re-hashed one part at a time. A WebSocket's transcript is checked like a
body. A canonical form kept as a blob is read back and decompressed too, since the
chain covers the form itself.
"""

from typing import TYPE_CHECKING

from sqlalchemy import Connection, select

from freezeframe.storage.chain import exchange_digest, link
from freezeframe.storage.errors import CassetteNotFound
from freezeframe.storage.records import VerifyReport
from freezeframe.storage.sql.bodies import Damaged, form, problem
from freezeframe.storage.sql.fork import provenance, start_of
from freezeframe.storage.sql.rows import chain_fields
from freezeframe.storage.sql.schema import CHAINED, cassettes, exchanges

if TYPE_CHECKING:
    from freezeframe.storage.objects import BlobStore

_BODIES = (
    ("request", "request_body_digest"),
    ("response", "response_body_digest"),
    ("transcript", "messages_digest"),
)


def verify_cassette(
    conn: Connection, cassette: str, where: str, objects: "BlobStore | None" = None
) -> VerifyReport:
    query = (
        select(
            cassettes.c.head,
            cassettes.c.origin.label("cassette_origin"),
            cassettes.c.id.label("cassette_id"),
            exchanges.c.id,
            exchanges.c.chain,
            exchanges.c.canonical_digest,
            *CHAINED,
        )
        .select_from(cassettes.outerjoin(exchanges))
        .where(cassettes.c.name == cassette)
        .order_by(exchanges.c.id)
    )
    head: str | None = None
    cassette_id: int | None = None
    origin: str | None = None
    previous: str | None = None
    previous_seq, checked = None, 0
    body_problems: dict[str, str | None] = {}
    for row in conn.execute(query).mappings():
        head, origin, cassette_id = row["head"], row["cassette_origin"], row["cassette_id"]
        if previous is None:
            previous = start_of(origin)
        if row["id"] is None:
            break
        seq = row["seq"]
        for which, column in _BODIES:
            name = row[column]
            if name is not None and name not in body_problems:
                body_problems[name] = problem(conn, name, objects)
            if name is not None and body_problems[name]:
                detail = f"exchange {seq}: its {which} {body_problems[name]}"
                return VerifyReport(cassette, checked, False, seq, detail)
        canonical = None
        if (name := row["canonical_digest"]) is not None:
            try:
                canonical = form(conn, name, objects)
            except Damaged as exc:
                detail = f"exchange {seq}: its canonical form {exc}"
                return VerifyReport(cassette, checked, False, seq, detail)
        fields = chain_fields(row, cassette, canonical)
        if link(previous, exchange_digest(fields)) != row["chain"]:
            return VerifyReport(cassette, checked, False, seq, _mismatch(seq, previous_seq))
        previous, previous_seq, checked = row["chain"], seq, checked + 1
    if head is None or previous is None or cassette_id is None:
        raise CassetteNotFound(cassette, where)
    if previous != head:
        return VerifyReport(cassette, checked, False, None, _truncated(previous_seq))
    return VerifyReport(
        cassette,
        checked,
        True,
        None,
        f"{checked} exchanges, chain intact",
        head=head,
        provenance=provenance(conn, cassette_id, origin),
    )


def _mismatch(seq: int, previous_seq: int | None) -> str:
    if previous_seq is None:
        return (
            f"exchange {seq}, the first written, does not match its chain value: "
            "it was changed, or exchanges before it were deleted"
        )
    return (
        f"exchange {seq}, written after exchange {previous_seq}, does not match its chain "
        "value: it was changed, or exchanges between them were deleted or reordered"
    )


def _truncated(last_seq: int | None) -> str:
    if last_seq is None:
        return "the cassette has no exchanges left, but its chain head shows some were deleted"
    return (
        f"the chain ends at exchange {last_seq}, but the cassette's head is later: "
        "exchanges written after it were deleted"
    )
