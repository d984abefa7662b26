"""Alembic's entry point: runs the revisions on the connection freezeframe opened.

storage.sql.migrations hands over its connection, inside the transaction the store is opened
in, so a migration and the version it writes commit together or not at all.
"""

from alembic import context

from freezeframe.storage.sql.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
