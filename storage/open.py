"""open_store(url): the one place a store URL becomes a Store."""

from pathlib import Path

from freezeframe.storage.base import Store


def open_store(
    url: str,
    *,
    create: bool = True,
    writer_process: bool = False,
    defer_writer: bool = False,
    blobs: str | None = None,
    outbox: Path | None = None,
    reader: str | None = None,
) -> Store:
    """Open (and on first use, unless ``create`` is False, create) the store at ``url``.

    ``sqlite:///PATH`` keeps everything in one file, creating its directory;
    ``postgresql://USER@HOST/DATABASE`` (or ``postgresql+psycopg://``) uses a
    PostgreSQL server through psycopg. Raises StoreUnavailable with a one-line
    reason and the password masked, StoreNotFound when ``create`` is False and there
    is no store at ``url``, or SchemaTooNew.

    ``writer_process``: the store's writes (commits, compression, search indexing) run in
    a child process instead of a thread of this one, so they never take the GIL from this
    process (the proxy; storage.sql.writerprocess). Close the store to drain it.
    ``defer_writer``: that process is started by the first write, not now (a replaying
    proxy, which may write nothing, answers sooner; a process that cannot start is then
    reported by Store.health(), not raised here).

    ``blobs``: bodies go to (and are read from) that object store, ``s3://BUCKET[/PREFIX]``
    (storage.objects), waiting in the ``outbox`` directory while it is away.

    ``reader``: the dotted path (``module:function``) of a function that returns what the
    writer runs on each exchange submitted with ``to_read`` before storing it (the proxy's:
    evidence.reading_in). A path rather than a callable, because the writer process
    imports it itself; it is imported when the first such exchange comes.
    """
    # Imported here so that importing the records does not import SQLAlchemy.
    from freezeframe.storage.sql import SqlStore

    return SqlStore.open(
        url,
        create=create,
        writer_process=writer_process,
        defer_writer=defer_writer,
        blobs_url=blobs,
        outbox=outbox,
        reader=reader,
    )
