"""Schema migrations are Alembic revisions, v1 to the current version, in one line."""

from __future__ import annotations

import subprocess
import sys

import sqlalchemy
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from freezeframe.storage import open_store
from freezeframe.storage.sql.migrations import HEAD, LOCATION
from freezeframe.storage.sql.schema import SCHEMA_VERSION


def scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(LOCATION))
    return ScriptDirectory.from_config(config)


def test_the_revisions_run_from_v1_to_the_current_schema_version() -> None:
    found = [script.revision for script in scripts().walk_revisions()]
    assert found == [f"v{n}" for n in range(SCHEMA_VERSION, 0, -1)]
    assert scripts().get_heads() == [HEAD]


def test_alembic_reads_a_new_store_as_at_its_head(store_url: str) -> None:
    open_store(store_url).close()
    engine = sqlalchemy.create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == HEAD
    finally:
        engine.dispose()


def test_a_current_store_opens_without_loading_alembic(store_url: str) -> None:
    open_store(store_url).close()
    program = (
        "import sys\n"
        "from freezeframe.storage import open_store\n"
        f"open_store({store_url!r}).close()\n"
        "print('alembic' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-P", "-c", program], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "False", result.stderr
