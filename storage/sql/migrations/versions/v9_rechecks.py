"""8 -> 9: the last recheck of each failure group, and the tape each cassette's last replay
left.

See storage.sql.schema for what version 9 holds. The tables are written out here as version 9
made them (the schema's ExactText is TEXT in the database; its escaping happens in Python), so
later changes to the schema module do not change this step; it checks what already exists, so
one cut short runs again (storage.sql.versioning). Their primary keys are named by the schema's
naming convention, as a new store of version 9 named them (``pk_rechecks``, ``pk_tapes``);
this step first left them to the database (PostgreSQL's ``rechecks_pkey``), which stores
migrated then keep, and which nothing refers to.
"""

from alembic import op
from sqlalchemy import Column, Double, MetaData, Table, Text

revision = "v9"
down_revision = "v8"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name, key in (("rechecks", "signature"), ("tapes", "cassette")):
        Table(
            name,
            MetaData(naming_convention={"pk": "pk_%(table_name)s"}),
            Column(key, Text, primary_key=True),
            Column("at", Double, nullable=False),
            Column("document", Text, nullable=False),
        ).create(op.get_bind(), checkfirst=True)
