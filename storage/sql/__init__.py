"""The Store on a SQL database (SQLite or PostgreSQL), behind SQLAlchemy Core."""

from freezeframe.storage.sql.store import SqlStore

__all__ = ["SqlStore"]
