"""A real SQLite store in a temporary directory for the addon unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.addon_chain import sqlite_store

from freezeframe.storage import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with sqlite_store(tmp_path) as opened:
        yield opened
