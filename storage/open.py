"""open_store(url): the one place a store URL becomes a Store."""

from storage.base import Store


def open_store(url: str) -> Store:
    """Open (and on first use, create) the store at ``url``.

    ``sqlite:///PATH`` keeps everything in one file, creating its directory;
    ``postgresql://USER@HOST/DATABASE`` (or ``postgresql+psycopg://``) uses a
    PostgreSQL server through psycopg. Raises StoreUnavailable with a one-line
    reason and the password masked, or SchemaTooNew.
    """
    # Imported here so that importing the records does not import SQLAlchemy.
    from storage.sql import SqlStore

    return SqlStore.open(url)
