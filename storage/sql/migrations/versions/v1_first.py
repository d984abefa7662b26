"""Version 1, the first schema: where a store from before Alembic at version 1 is stamped.

Stores are created whole at the head (storage.sql.migrations), never built up from an empty
database, so there is nothing to do here.
"""

revision = "v1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing: see the module's docstring."""
