"""Schema migrations are Alembic revisions, v1 to the current version, in one line; each is
frozen (it imports nothing of today's store), and a store upgraded through them from any
revision has the schema a new store has."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from support.schemas import new_store_schema, schema_of, v1_schema_beside

from freezeframe.storage import open_store
from freezeframe.storage.sql.migrations import LOCATION
from freezeframe.storage.sql.schema import SCHEMA_VERSION
from freezeframe.storage.sql.versioning import HEAD


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


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Each module ``path`` imports, with its line; a relative one with its leading dots."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            dots = "." * node.level
            if node.module is None:
                found += [(node.lineno, dots + alias.name) for alias in node.names]
            else:
                found.append((node.lineno, dots + node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


FROZEN_HELPER = "freezeframe.storage.sql.migrations.frozen_"
"""What a revision may import of freezeframe: a helper of the migrations that only revisions
import, holding logic copied as that version ran it (``migrations/frozen_*.py``). By its full
name: Alembic loads a revision by its path, outside any package, where a relative import
fails."""


def allowed(module: str) -> bool:
    """Alembic, SQLAlchemy, the standard library, or a frozen helper of the migrations."""
    top = module.split(".")[0]
    return top in {"alembic", "sqlalchemy", *sys.stdlib_module_names} or module.startswith(
        FROZEN_HELPER
    )


def test_each_revision_freezes_its_own_tables() -> None:
    """A revision that imported today's schema (or the code that fills the search index)
    would change with it, and an old store would be migrated to what a later version says
    the tables were; so every file Alembic loads by path (env.py, the revisions) holds its own
    table definitions and imports only Alembic, SQLAlchemy, the standard library and the
    migrations' frozen helpers."""
    files = sorted(LOCATION.rglob("*.py"))
    assert len([path for path in files if path.name.startswith("v")]) == SCHEMA_VERSION
    ours = [
        f"{path.relative_to(LOCATION)}:{line}: {module}"
        for path in files
        for line, module in imports_of(path)
        if not allowed(module)
    ]
    assert ours == []


def test_the_import_check_tells_a_revision_that_reaches_into_todays_store(
    tmp_path: Path,
) -> None:
    revision = tmp_path / "v11_reaching.py"
    revision.write_text(
        "import json\n"
        "from alembic import op\n"
        "from sqlalchemy import Column\n"
        "from freezeframe.storage.sql.migrations.frozen_search import index_as_11_did\n"
        "from freezeframe.storage.sql.schema import metadata\n"
        "from freezeframe.storage.sql import search\n"
        "from .frozen_search import index_as_11_did\n"
        "from . import schema\n"
    )
    refused = [module for _, module in imports_of(revision) if not allowed(module)]
    assert refused == [
        "freezeframe.storage.sql.schema",
        "freezeframe.storage.sql",
        ".frozen_search",
        ".schema",
    ]


def upgrade_to(url: str, revision: str) -> None:
    """Build a store from an empty database through the revisions, up to ``revision``, with
    the version row the runner would have written then."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            config = Config()
            config.set_main_option("script_location", str(LOCATION))
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
            conn.execute(
                sqlalchemy.text("UPDATE meta SET value = :v WHERE name = 'schema_version'"),
                {"v": revision.removeprefix("v")},
            )
    finally:
        engine.dispose()


def test_the_first_revision_builds_the_first_schema_as_released(store_url: str) -> None:
    upgrade_to(store_url, "v1")
    engine = sqlalchemy.create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == "v1"
            assert list(conn.execute(sqlalchemy.text("SELECT name, value FROM meta"))) == [
                ("schema_version", "1")
            ]
    finally:
        engine.dispose()
    assert schema_of(store_url) == v1_schema_beside(store_url)


@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION + 1))
def test_a_store_upgraded_from_each_revision_has_a_new_stores_schema(
    store_url: str, start: int
) -> None:
    """From the first schema, and from each one after it, the revisions lead to exactly the
    tables, columns, types, keys, indexes and full-text tables a new store is created with."""
    upgrade_to(store_url, f"v{start}")
    open_store(store_url).close()
    engine = sqlalchemy.create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == HEAD
    finally:
        engine.dispose()
    assert schema_of(store_url) == new_store_schema(store_url)
