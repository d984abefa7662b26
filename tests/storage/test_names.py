"""Cassette names are refused where they enter, with the reason."""

from __future__ import annotations

import pytest

from freezeframe.storage.names import InvalidCassetteName, validate_cassette_name


@pytest.mark.parametrize("name", ["default", "bug-8821", "agent.v2", "run:42@main", "a" * 128])
def test_usable_names(name: str) -> None:
    assert validate_cassette_name(name) == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        ("a/b", "no '/'"),
        ("..", "no '..'"),
        ("x..y", "no '..'"),
        ("tab\there", "control characters"),
        (".hidden", "starting with a letter or digit"),
        ("a" * 129, "longer than 128"),
    ],
)
def test_refused_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidCassetteName, match="invalid cassette name") as refused:
        validate_cassette_name(name)
    assert reason in str(refused.value) and "\n" not in str(refused.value)
