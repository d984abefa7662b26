"""Replay positions shared through the store, for proxy replicas replaying one session.

One process counts occurrences in memory (addons.state); replicas behind one service name
must count together, or each would serve the first recording of a key to whichever request
reached it first. A claim is one statement, atomic in both databases: the row for (session,
cassette, key) is created at 1 or moved one on, and the occurrence it stood at is returned.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, literal_column
from sqlalchemy.sql.dml import ReturningInsert

from freezeframe.storage.sql.engine import dialect_insert
from freezeframe.storage.sql.schema import replay_positions


def claim(conn: Connection, session: str, cassette: str, key: str) -> int:
    """The occurrence of ``key`` this request of ``session`` is served."""
    insert = dialect_insert(conn.dialect.name, replay_positions)
    counted = insert.values(session=session, cassette=cassette, key=key, next=1)
    statement: ReturningInsert[Any] = counted.on_conflict_do_update(
        index_elements=["session", "cassette", "key"],
        set_={"next": replay_positions.c.next + 1},
    ).returning(literal_column("next") - 1)
    return int(conn.execute(statement).scalar_one())


def release(conn: Connection, session: str) -> None:
    conn.execute(delete(replay_positions).where(replay_positions.c.session == session))
