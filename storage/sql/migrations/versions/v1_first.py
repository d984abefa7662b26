"""Version 1, the first schema: the tables as version 1 created them, frozen here.

A store from before Alembic at version 1 already has them, and is stamped ``v1`` rather than
upgraded through this step (storage.sql.versioning); a new store is created whole at the head.
So this step runs only on an empty database, where it builds what version 1 built (each table
only if it is missing, and the version row version 1 wrote), which lets every later revision
be checked from the very first schema (tests/storage/test_migrations.py).
"""

from alembic import op
from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    insert,
    select,
)

revision = "v1"
down_revision = None
branch_labels = None
depends_on = None

_metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)
_meta = Table(
    "meta",
    _metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
Table(
    "cassettes",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("created_at", Double, nullable=False),
    Column("head", String(64), nullable=False),
)
Table(
    "blobs",
    _metadata,
    Column("digest", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("stored_size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
Table(
    "exchanges",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cassette_id", ForeignKey("cassettes.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("occurrence", Integer, nullable=False),
    Column("key", Text, nullable=False),
    Column("key_scheme", Integer, nullable=False),
    Column("canonical", LargeBinary, nullable=False),
    Column("method", Text, nullable=False),
    Column("scheme", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("port", Integer, nullable=False),
    Column("path", Text, nullable=False),
    Column("http_version", Text, nullable=False),
    Column("request_headers", Text, nullable=False),
    Column("request_body_digest", ForeignKey("blobs.digest")),
    Column("started_at", Double, nullable=False),
    Column("duration", Double),
    Column("status", Integer),
    Column("reason", Text),
    Column("response_http_version", Text),
    Column("response_headers", Text),
    Column("response_trailers", Text),
    Column("response_body_digest", ForeignKey("blobs.digest")),
    Column("response_bytes", BigInteger, nullable=False),
    Column("chunks", Text),
    Column("first_byte_at", Double),
    Column("outcome", String(16), nullable=False),
    Column("error", Text),
    Column("context", Text, nullable=False),
    Column("chain", String(64), nullable=False),
    UniqueConstraint("cassette_id", "seq"),
    UniqueConstraint("cassette_id", "key", "occurrence"),
)
"""Version 1's tables (its ExactText columns are TEXT in the database: the escaping happens
in Python)."""


def upgrade() -> None:
    conn = op.get_bind()
    _metadata.create_all(conn, checkfirst=True)
    version = select(_meta.c.value).where(_meta.c.name == "schema_version")
    if conn.scalar(version) is None:
        conn.execute(insert(_meta).values(name="schema_version", value="1"))
