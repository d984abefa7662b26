"""The store fixtures every storage test module shares: one store per backend."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from freezeframe.storage import Store, open_store


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store that no other test sees."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/data/freezeframe.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with open_store(store_url) as opened:
        yield opened
