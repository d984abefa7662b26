"""Alembic's entry point: runs the revisions on the connection freezeframe opened.

storage.sql.versioning hands over its connection, inside the transaction the store is opened
in, so a migration and the version it writes commit together or not at all. No target
metadata: that is for Alembic's autogenerate, and would tie the frozen revisions to today's
schema.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection)
with context.begin_transaction():
    context.run_migrations()
