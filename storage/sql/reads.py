"""Reading one whole exchange: the replay hot path, in one statement.

lookup() runs on the proxy's event loop for every replayed request, so it is one
SELECT compiled once (storage.sql.prepared) on a connection the thread keeps. The
SELECT joins the blobs of the request body, the response body and the canonical
form and brings along their compressed data when small (JOINED_LIMIT), so a hit
needs no second query; a body found in the blob cache is not even decompressed, and one
stored against a base (storage.deltas) that is cached costs one decompression.
Only a body that is larger, or was streamed in parts, is read with another query,
and so is a WebSocket's transcript when it is not cached: joining its blob too would
cost every other lookup, and WebSockets are few.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, case, null, select

from freezeframe.storage import blobs
from freezeframe.storage.records import FACT_KINDS, BlobRef, Exchange
from freezeframe.storage.sql import bodies
from freezeframe.storage.sql.prepared import PinnedConnections, Prepared
from freezeframe.storage.sql.rows import to_exchange
from freezeframe.storage.sql.schema import CHAINED, cassettes, exchanges
from freezeframe.storage.sql.schema import blobs as blobs_table
from freezeframe.storage.transcript import DamagedTranscript

JOINED_LIMIT = 256 * 1024
"""Bodies up to this size come with the exchange's row; larger ones by a query of their own."""

_BLOBS = (
    ("request", exchanges.c.request_body_digest, blobs.INLINE_LIMIT),
    ("response", exchanges.c.response_body_digest, blobs.INLINE_LIMIT),
    # A canonical form is always loaded whole: the Exchange holds it as bytes.
    ("form", exchanges.c.canonical_digest, None),
)


def _whole_exchange() -> Any:
    tables = exchanges.join(cassettes)
    columns: list[Any] = [
        exchanges.c.chain,
        *CHAINED,
        exchanges.c.canonical_digest,
        exchanges.c.stripped,
        *(exchanges.c[name] for name in FACT_KINDS),
    ]
    for which, digest, _ in _BLOBS:
        blob = blobs_table.alias(f"{which}_blob")
        tables = tables.outerjoin(blob, blob.c.digest == digest)
        joined = and_(blob.c.parts == 0, blob.c.size <= JOINED_LIMIT)
        columns += [
            blob.c.size.label(f"{which}_size"),
            blob.c.parts.label(f"{which}_parts"),
            case((joined, blob.c.data), else_=null()).label(f"{which}_data"),
            blob.c.base.label(f"{which}_base"),
        ]
    return select(*columns).select_from(tables)


_WHOLE = _whole_exchange()
_NAMES = tuple(column.key for column in _WHOLE.selected_columns)

LOOKUP = _WHOLE.where(
    cassettes.c.name == bindparam("cassette"),
    exchanges.c.key == bindparam("key"),
    exchanges.c.occurrence == bindparam("occurrence"),
)
BY_SEQ = _WHOLE.where(
    cassettes.c.name == bindparam("cassette"), exchanges.c.seq == bindparam("seq")
)
CASSETTE = _WHOLE.where(cassettes.c.name == bindparam("cassette")).order_by(exchanges.c.seq)


class ExchangeReader:
    """Whole exchanges by key and occurrence or by seq. Thread-safe.

    ``connect`` gives a Core connection for the rare second query (large bodies).
    Raises bodies.Damaged for a body or form that is missing or cannot be read, and
    the driver's errors as they are.
    """

    def __init__(
        self,
        engine: Engine,
        cache: blobs.BlobCache,
        connect: Callable[[], AbstractContextManager[Connection]],
    ) -> None:
        self._cache = cache
        self._connect = connect
        self._connections = PinnedConnections(engine)
        self._lookup = Prepared(LOOKUP, engine.dialect)
        self._by_seq = Prepared(BY_SEQ, engine.dialect)

    def lookup(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        return self._read(
            self._lookup, cassette, {"cassette": cassette, "key": key, "occurrence": occurrence}
        )

    def by_seq(self, cassette: str, seq: int) -> Exchange | None:
        return self._read(self._by_seq, cassette, {"cassette": cassette, "seq": seq})

    def cassette(self, cassette: str) -> Iterator[Exchange]:
        """The cassette's exchanges in seq order, each one that its row alone (and the blob
        cache) can answer: one query for the whole cassette, read as it goes. An exchange
        whose body must be read by a query of its own is left out, and so is a damaged
        one: lookup() finds it, and says what is wrong with it when it is asked for."""
        with self._connect() as conn:
            for found in conn.execute(CASSETTE, {"cassette": cassette}):
                row = dict(zip(_NAMES, found, strict=True))
                try:
                    exchange = self._whole(row, cassette, second_query=False)
                except bodies.Damaged:
                    continue
                if exchange is not None:
                    yield exchange

    def close(self) -> None:
        self._connections.close()

    def _read(self, query: Prepared, cassette: str, params: dict[str, Any]) -> Exchange | None:
        found = self._connections.run(lambda cursor: query.first(cursor, params))
        if found is None:
            return None
        return self._whole(dict(zip(_NAMES, found, strict=True)), cassette, second_query=True)

    def _whole(self, row: dict[str, Any], cassette: str, *, second_query: bool) -> Exchange | None:
        """The exchange of ``row``; without ``second_query``, None when a body, form or
        transcript would take a query of its own."""
        loaded: dict[str, bytes | BlobRef] = {}
        later: dict[bool, set[str]] = {}
        for which, digest, limit in _BLOBS:
            name = row[digest.key]
            if name is None or name in loaded:
                continue
            data = row[f"{which}_data"]
            body = bodies.resolve(
                name,
                row[f"{which}_size"],
                row[f"{which}_parts"],
                data,
                self._cache,
                limit,
                row[f"{which}_base"],
            )
            if body is None:
                later.setdefault(limit is None, set()).add(name)
            else:
                loaded[name] = body
        if (name := row["messages_digest"]) is not None and name not in loaded:
            cached = self._cache.get(name)
            if cached is None:
                later.setdefault(True, set()).add(name)
            else:
                loaded[name] = cached
        if later and not second_query:
            return None
        if later:
            with self._connect() as conn:
                for whole, names in later.items():
                    loaded |= bodies.load(conn, names, self._cache, whole=whole)
        try:
            return to_exchange(row, cassette, loaded)
        except DamagedTranscript as exc:
            raise bodies.Damaged(str(exc)) from None
