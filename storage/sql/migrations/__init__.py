"""Schema migrations, by Alembic: each step from one schema version to the next is a revision.

The revision of version N is ``vN`` (``versions/vN_*.py``); storage.sql.versioning runs them
when it opens an older store. Alembic loads a revision by its path, so an import from one is
a dependency that no import graph shows: a revision that imported today's schema, or the code
that fills today's search index, would change with them, and an old store would be migrated
to what a later version says the tables were. So this package is frozen: each revision
declares the tables and columns it creates or alters as that version made them, and imports
nothing but Alembic, SQLAlchemy and the standard library (an import-linter contract in
pyproject.toml, and tests/storage/test_migrations.py, which reads every revision's imports).

A new schema step is a revision file ``versions/vN_<what>.py`` (``revision = "vN"``,
``down_revision = "vN-1"``, an ``upgrade()`` that checks what already exists, so that a step
cut short runs again) plus ``SCHEMA_VERSION = N`` in storage.sql.schema; docs/development.md
shows one.
"""

from pathlib import Path

LOCATION = Path(__file__).parent
"""Alembic's script location: env.py and versions/."""
