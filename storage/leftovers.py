"""What a refused command that makes a store on first use leaves behind: nothing.

``freezeframe import`` makes the store (its directory, its SQLite file, the data directory's
fingerprint key) when there is none, so that a bundle someone sent can be read in an empty
directory. A file it refuses must not leave an empty store there: the next command would
take it for one, and a proxy started on it would replay from nothing. So the paths such a
command may make are noted before it starts, and those that were not there are removed if
it fails. A PostgreSQL store lives in a database the user made; its tables are left.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database while it is open (WAL, its index, rollback)."""


def new_sqlite_files(url: str) -> tuple[Path, ...]:
    """The files opening the SQLite store at ``url`` would make, the database first; none
    when the database is there already (its companions are its own, and another process
    may hold them open) or the store is no SQLite file (PostgreSQL, a ``file:`` URI)."""
    from sqlalchemy import make_url

    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in {"", ":memory:"}:
        return ()
    if database.startswith("file:"):
        return ()
    path = Path(database)
    if path.exists():
        return ()
    return (path, *(path.with_name(path.name + suffix) for suffix in SQLITE_COMPANIONS))


class Made:
    """The paths among ``paths`` (files, and the directories above them) that do not exist
    yet, so that ``undo()`` removes exactly what was made since."""

    def __init__(self, paths: Iterable[Path]) -> None:
        absent: list[Path] = []
        for path in paths:
            path = path.absolute()
            if path.exists():
                continue
            absent.append(path)
            parent = path.parent
            while not parent.exists() and parent != parent.parent:
                absent.append(parent)
                parent = parent.parent
        # Deepest first, so that a directory is empty by the time its turn comes.
        self._absent = sorted(set(absent), key=lambda p: len(p.parts), reverse=True)

    def undo(self) -> None:
        """Remove what was absent and is there now: files, then directories left empty (a
        directory something else has put a file in since stays, with that file)."""
        for path in self._absent:
            try:
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink(missing_ok=True)
            except OSError:
                continue
