"""The search index: writing it with each batch, querying it, and pruning it.

Each distinct value (storage.search) is one ``texts`` row, named by 64 bits of its digest
(value_digest) and its text compressed (pack), indexed by SQLite's FTS5 (``texts_fts``, contentless:
it keeps tokens, not text) or by PostgreSQL's ``tsvector`` column with a GIN index, both
written from the text in hand when the value is first stored; ``text_uses`` says which
exchanges hold it. A snippet is cut from the matched values, decompressed at query time.
A contentless FTS5 table forgets a row only when told its text again (SQLite 3.40 has no
``contentless_delete``): pruning decompresses the values it deletes (drop_values).

A query is one phrase, matched by words in order, case-insensitively, within one value:
``ord_8821`` finds ``"order": "ord_8821"`` and ``gpt-4o-2024-08-06`` finds that model's
answers.

The writer thread indexes what it has committed a batch at a time (SearchIndex, driven by
storage.sql.writer), in a transaction of its own, and notes in ``meta`` the highest exchange
id it has indexed (MARK). A process killed between the two leaves committed exchanges
unindexed; the next store opened on the database finds them above the mark and indexes them
(catch_up). The statements are the driver's own SQL: this runs for every exchange recorded.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import blake3
from sqlalchemy import ColumnElement, Connection, Engine, exists, func, select, text
from sqlalchemy.engine.interfaces import DBAPICursor

from freezeframe.storage import blobs
from freezeframe.storage.records import FACT_KINDS, NewExchange, SearchHit, format_url
from freezeframe.storage.search import Conversations, Searchable, Values
from freezeframe.storage.sql import bodies
from freezeframe.storage.sql.engine import exclusive
from freezeframe.storage.sql.rows import to_exchange
from freezeframe.storage.sql.schema import (
    CHAINED,
    cassettes,
    exchanges,
    meta,
    text_uses,
    to_stored,
)

log = logging.getLogger("freezeframe.storage")

KNOWN_TEXTS = 65_536
"""Digests of values the writer knows the id of: an agent's conversation repeats its history
in every request, and those values then cost no query at all."""
CARRIED = 262_144
"""Request values the writer has indexed per cassette. A conversation's requests repeat its
history, so indexing every request's every value grows with the square of its turns; a
request value is indexed where it first appears in the cassette, which is where it entered
the run. Forgetting (a restart, a full table) only indexes a value again: a hit more, never
one less."""
SNIPPET = 160
"""Characters shown on each side of a match."""
BACKFILL_BATCH = 200
MARK = "search_indexed"
"""The ``meta`` row naming the highest exchange id whose values are indexed."""
SLACK = 4096
"""Exchange ids below the mark that catch_up checks too. Several processes may record into
one store, each indexing its own exchanges a batch later than it commits them: one may have
indexed (and marked) past exchanges another committed and had not yet indexed when it was
killed. Each holds at most a batch pending, so a few thousand ids cover many processes."""


class SearchIndex:
    """The writer thread's side of the index, in the writer's transaction."""

    def __init__(self, engine: Engine) -> None:
        self._postgresql = engine.dialect.name == "postgresql"
        self._known: OrderedDict[int, int] = OrderedDict()
        self._carried: OrderedDict[tuple[int, int], None] = OrderedDict()
        self._conversations = Conversations()
        mark = "%s" if self._postgresql else "?"
        self._find = (
            f"SELECT id, digest FROM texts WHERE digest = ANY({mark})"
            if self._postgresql
            else "SELECT id, digest FROM texts WHERE digest IN (SELECT value FROM json_each(?))"
        )
        self._insert = (
            "INSERT INTO texts (digest, data, tsv) VALUES "
            f"({mark}, {mark}, to_tsvector('simple', left({mark}, 65536))) "
            "ON CONFLICT (digest) DO NOTHING"
            if self._postgresql
            else f"INSERT INTO texts (digest, data) VALUES ({mark}, {mark})"
        )
        self._fts = "INSERT INTO texts_fts (rowid, body) VALUES (?, ?)"
        self._use = (
            f"INSERT INTO text_uses (text_id, exchange_id, part) VALUES ({mark}, {mark}, {mark}) "
            "ON CONFLICT DO NOTHING"
        )
        self._mark = (
            f"INSERT INTO meta (name, value) VALUES ('{MARK}', {mark}) ON CONFLICT (name) "
            "DO UPDATE SET value = excluded.value "
            "WHERE CAST(meta.value AS BIGINT) < CAST(excluded.value AS BIGINT)"
        )

    def values(self, exchange: NewExchange, cassette_id: int) -> Values:
        """The values of ``exchange`` (of cassette row ``cassette_id``) to index: of a
        request, what it adds to its conversation's last request indexed
        (storage.search.Conversations)."""
        return self._conversations.values(exchange, cassette_id)

    def add(
        self, cursor: DBAPICursor, held: Sequence[tuple[int, int, Sequence[Searchable]]]
    ) -> None:
        """Index the values each exchange (by row id, with its cassette's id) holds; the
        requests they were read from (``values``) are then remembered, for the next
        request of their conversation."""
        digests = {value.text: value_digest(value.text) for _, _, vs in held for value in vs}
        named = {digest: text for text, digest in digests.items()}
        ids = {digest: self._known[digest] for digest in named if digest in self._known}
        wanted = [digest for digest in named if digest not in ids]
        if wanted:
            cursor.execute(self._find, self._digests(wanted))
            ids.update({digest: row_id for row_id, digest in cursor.fetchall()})
        # Sorted: two PostgreSQL writers storing some of the same new values take their
        # rows' locks in one order, and so never wait for each other in a circle.
        new = sorted(digest for digest in wanted if digest not in ids)
        if new:
            # Statements per batch, not per value: a request carries dozens of values.
            if self._postgresql:
                rows = [(d, pack(named[d]), to_stored(named[d])) for d in new]
                cursor.executemany(self._insert, rows)
            else:
                cursor.executemany(self._insert, [(d, pack(named[d])) for d in new])
            cursor.execute(self._find, self._digests(new))
            inserted = {digest: row_id for row_id, digest in cursor.fetchall()}
            if not self._postgresql:
                # The transaction holds the database (Writer._index), so no other process
                # stored one of these between the lookup and the insert: each is new here.
                # In rowid order: FTS5 writes out what it holds in memory (a segment more to
                # merge later) whenever a rowid is not above the one before.
                fts = sorted(
                    (row_id, to_stored(named[digest])) for digest, row_id in inserted.items()
                )
                cursor.executemany(self._fts, fts)
            ids.update(inserted)
        uses = []
        for row_id, cassette_id, values in held:
            for value in values:
                value_id = ids[digests[value.text]]
                if value.part == "request":
                    if (cassette_id, value_id) in self._carried:
                        self._carried.move_to_end((cassette_id, value_id))
                        continue
                    self._carried[(cassette_id, value_id)] = None
                uses.append((value_id, row_id, value.part))
        if uses:
            cursor.executemany(self._use, uses)
        while len(self._carried) > CARRIED:
            self._carried.popitem(last=False)
        self._remember(ids)
        for _, _, values in held:
            self._conversations.remember(values)

    def mark(self, cursor: DBAPICursor, exchange_id: int) -> None:
        """Note that exchanges up to ``exchange_id`` are indexed (the mark never goes back)."""
        cursor.execute(self._mark, (str(exchange_id),))

    def _digests(self, digests: list[int]) -> tuple[object]:
        """A list of digests as ``_find`` takes it: an array, or a JSON array for SQLite."""
        return (digests if self._postgresql else json.dumps(digests),)

    def forget(self) -> None:
        """Values were deleted (a cassette removed), or a batch's index rolled back: known
        ids may be gone, and values noted as indexed may not be."""
        self._known.clear()
        self._carried.clear()
        self._conversations.clear()

    def _remember(self, ids: dict[int, int]) -> None:
        for digest, row_id in ids.items():
            self._known[digest] = row_id
            self._known.move_to_end(digest)
        while len(self._known) > KNOWN_TEXTS:
            self._known.popitem(last=False)


def value_digest(value: str) -> int:
    """What names a value: the first 64 bits of the blake3 of its text, as a signed integer
    (8 bytes in the row and again in its index, where a hex digest took 64 in each; and a
    number, which both databases' arrays and SQLite's json_each hold). Two of ten million
    values share one with odds of about one in 370,000; the second would then be found by
    the first one's text."""
    digest = blake3.blake3(_encode(value)).digest(length=8)
    return int.from_bytes(digest, "big", signed=True)


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def pack(value: str) -> bytes:
    """A value as ``texts.data`` keeps it: zstd-compressed, or its UTF-8 text when that is
    no longer (a short value: a frame costs a dozen bytes). UTF-8 never starts with zstd's
    magic number (0xB5 cannot follow an ASCII byte), so unpack tells them apart."""
    raw = _encode(value)
    packed = blobs.compress(raw)
    return packed if len(packed) < len(raw) else raw


def unpack(data: bytes) -> str:
    raw = blobs.decompress(data) if data[:4] == _ZSTD_MAGIC else bytes(data)
    return raw.decode("utf-8", "surrogatepass")


def _encode(value: str) -> bytes:
    # Lone surrogates (undecodable bytes mitmproxy kept) are stored, and searched, as sent.
    return value.encode("utf-8", "surrogatepass")


def search(conn: Connection, query: str, cassette: str | None, limit: int) -> list[SearchHit]:
    """The exchanges holding a value that matches ``query`` (one phrase), newest first.
    A NUL separates words as a space does: neither engine takes one inside a query string."""
    phrase = " ".join(query.replace("\x00", " ").split())
    if not phrase:
        return []
    within = "AND c.name = :cassette" if cassette is not None else ""
    asked: dict[str, object] = {"cassette": cassette, "rows": limit * 8}
    if conn.dialect.name == "postgresql":
        # The matching values first, then their exchanges with the values' ids in the
        # statement: PostgreSQL's statistics then say how many exchanges hold them, and for a
        # value most hold (a model's name) it reads exchanges newest first and stops at the
        # page's end, instead of sorting every one that holds it (a third of a million).
        found = conn.execute(
            text("SELECT id FROM texts WHERE tsv @@ phraseto_tsquery('simple', :query)"),
            {"query": phrase},
        )
        asked["ids"] = [value_id for (value_id,) in found]
        if not asked["ids"]:
            return []
        source = "texts t"
        match = "u.text_id = ANY(:ids)"
    else:
        source = "texts_fts JOIN texts t ON t.id = texts_fts.rowid"
        match = "texts_fts MATCH :query"
        asked["query"] = '"' + phrase.replace('"', '""') + '"'
    rows = conn.execute(
        text(
            "SELECT c.name, e.seq, e.method, e.scheme, e.host, e.port, e.path, e.status, "
            "e.outcome, e.started_at, u.part, t.data "
            f"FROM {source} JOIN text_uses u ON u.text_id = t.id "
            "JOIN exchanges e ON e.id = u.exchange_id "
            "JOIN cassettes c ON c.id = e.cassette_id "
            f"WHERE {match} {within} "
            "ORDER BY e.started_at DESC, e.seq DESC LIMIT :rows"
        ),
        asked,
    )
    hits: dict[tuple[str, int], dict[str, Any]] = {}
    for name, seq, method, scheme, host, port, path, status, outcome, at, part, data in rows:
        hit = hits.get((name, seq))
        if hit is None:
            if len(hits) == limit:
                continue
            hit = hits[(name, seq)] = {
                "cassette": name,
                "seq": seq,
                "method": method,
                "url": format_url(scheme, host, port, path),
                "status": status,
                "outcome": outcome,
                "started_at": at,
                "parts": [],
                "match": _snippet(unpack(data), phrase),
            }
        if part not in hit["parts"]:
            hit["parts"].append(part)
    return [SearchHit(**hit | {"parts": tuple(hit["parts"])}) for hit in hits.values()]


def _snippet(body: str, phrase: str) -> str:
    """The matched value around the phrase's first word (the whole value when short)."""
    if len(body) <= 2 * SNIPPET:
        return body
    first = phrase.split()[0].lower()
    at = body.lower().find(first)
    start = max(0, at - SNIPPET) if at >= 0 else 0
    end = min(len(body), start + 2 * SNIPPET + len(first))
    return ("…" if start else "") + body[start:end] + ("…" if end < len(body) else "")


def forget_exchanges(conn: Connection, exchange_ids: Sequence[int]) -> None:
    """Drop the index entries of these exchanges, and the values no exchange holds any more."""
    used: set[int] = set()
    for batch in _batches(list(exchange_ids)):
        used.update(
            conn.scalars(
                text(f"SELECT DISTINCT text_id FROM text_uses WHERE exchange_id IN ({batch})")
            )
        )
        conn.execute(text(f"DELETE FROM text_uses WHERE exchange_id IN ({batch})"))
    for batch in _batches(sorted(used)):
        drop_values(conn, f"id IN ({batch}) AND id NOT IN (SELECT text_id FROM text_uses)")


def drop_values(conn: Connection, where: str) -> None:
    """Delete the values ``where`` (SQL over ``texts``) selects, and on SQLite their tokens:
    a contentless FTS5 table is told each row's text to forget it, decompressed here, a
    batch at a time and in rowid order (as FTS5 takes changes most cheaply)."""
    ids = list(conn.scalars(text(f"SELECT id FROM texts WHERE {where} ORDER BY id")))
    for batch in _batches(ids):
        if conn.dialect.name == "sqlite":
            rows = conn.execute(
                text(f"SELECT id, data FROM texts WHERE id IN ({batch}) ORDER BY id")
            )
            gone = [{"id": value_id, "body": to_stored(unpack(data))} for value_id, data in rows]
            forget = "INSERT INTO texts_fts (texts_fts, rowid, body) VALUES ('delete', :id, :body)"
            conn.execute(text(forget), gone)
        conn.execute(text(f"DELETE FROM texts WHERE id IN ({batch})"))


def _batches(ids: list[int], size: int = 500) -> Iterable[str]:
    """Comma-separated integer lists (ids are integers: safe to put into the SQL)."""
    for start in range(0, len(ids), size):
        yield ",".join(str(int(value)) for value in ids[start : start + size])


def rebuild(conn: Connection) -> None:
    """Index every stored exchange into an empty index, and mark it all indexed."""
    backfill(conn)
    _set_mark(conn, conn.scalar(select(func.max(exchanges.c.id))) or 0)


def catch_up(engine: Engine) -> int:
    """Index the committed exchanges a killed process left unindexed: those above the mark
    (less SLACK) that hold no value; every exchange holds some, its URL at least. Returns how
    many were indexed. Reads only, unless there is something to index or mark."""
    with engine.connect() as conn:
        start = max(0, marked(conn) - SLACK)
        top = conn.scalar(select(func.max(exchanges.c.id))) or 0
        found = conn.scalar(select(func.count()).where(_unindexed(start)))
        if not found and top <= marked(conn):
            return 0
    with exclusive(engine) as conn:
        indexed = backfill(conn, start)
        top = conn.scalar(select(func.max(exchanges.c.id))) or 0
        _set_mark(conn, top)
    return indexed


def marked(conn: Connection) -> int:
    """The highest exchange id known to be indexed (0: none, or a store without the mark)."""
    value = conn.scalar(select(meta.c.value).where(meta.c.name == MARK))
    return int(value or 0)


def _set_mark(conn: Connection, exchange_id: int) -> None:
    if conn.scalar(select(meta.c.value).where(meta.c.name == MARK)) is None:
        conn.execute(meta.insert().values(name=MARK, value=str(exchange_id)))
    else:
        conn.execute(meta.update().where(meta.c.name == MARK).values(value=str(exchange_id)))


def _unindexed(after: int) -> ColumnElement[bool]:
    """Exchanges after id ``after`` that hold no value in the index."""
    held = exists(select(1).where(text_uses.c.exchange_id == exchanges.c.id))
    return (exchanges.c.id > after) & ~held


def backfill(conn: Connection, after: int = 0) -> int:
    """Index every exchange after id ``after`` that holds no value yet (those stored before
    schema 5, or committed by a process killed before it indexed them); returns how many."""
    index = SearchIndex(conn.engine)
    cache = blobs.BlobCache()
    columns = [
        exchanges.c.id,
        exchanges.c.cassette_id,
        cassettes.c.name,
        exchanges.c.chain,
        *CHAINED,
        exchanges.c.canonical_digest,
        exchanges.c.stripped,
        *(exchanges.c[name] for name in FACT_KINDS),
    ]
    last = after
    indexed = 0
    while True:
        rows = (
            conn.execute(
                select(*columns)
                .join_from(exchanges, cassettes)
                .where(_unindexed(last))
                .order_by(exchanges.c.id)
                .limit(BACKFILL_BATCH)
            )
            .mappings()
            .all()
        )
        if not rows:
            break
        last = rows[-1]["id"]
        names = {
            row[column]
            for row in rows
            for column in ("request_body_digest", "response_body_digest", "canonical_digest")
            if row[column] is not None
        }
        loaded = bodies.load(conn, names, cache)
        held = []
        for row in rows:
            try:
                exchange = to_exchange({**row, "messages_digest": None}, row["name"], loaded)
                held.append(
                    (
                        row["id"],
                        row["cassette_id"],
                        index.values(exchange.recorded, row["cassette_id"]),
                    )
                )
            except Exception:
                # One exchange that cannot be read for search must not keep the store shut.
                log.exception(
                    "cannot index exchange %d of cassette %r for search", row["seq"], row["name"]
                )
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            index.add(cursor, held)
        finally:
            cursor.close()
        indexed += len(rows)
    if indexed:
        log.info("indexed %d stored exchanges for search", indexed)
    return indexed
