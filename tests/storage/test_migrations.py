"""Schema migrations are Alembic revisions, v1 to the current version, in one line."""

from __future__ import annotations

import ast
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


def test_each_revision_freezes_its_own_tables() -> None:
    """A revision that imported today's schema (or the code that fills the search index)
    would change with it, and an old store would be migrated to what a later version says
    the tables were; it holds its own table definitions and imports nothing of ours."""
    ours = []
    for path in sorted((LOCATION / "versions").glob("v*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] if node.level == 0 else [f"relative {node.module}"]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            ours += [
                f"{path.name}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] not in {"alembic", "sqlalchemy", "json"}
            ]
    assert ours == []
