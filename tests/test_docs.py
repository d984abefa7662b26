"""The README is the user-facing surface: every command, flag and variable must be in it,
with the environment variable and default the code really uses (datasette's test_docs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import click
import pytest

from freezeframe import cli

README = (Path(__file__).parents[1] / "README.md").read_text()


def settings_rows() -> dict[str, tuple[str, str]]:
    """flag -> (environment variable, default) from the README's settings table."""
    rows = {}
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`--"):
            flag = re.match(r"`(--[a-z-]+)", cells[0])
            env = re.match(r"`(FREEZEFRAME_[A-Z_]+)`", cells[1])
            if flag and env:
                rows[flag.group(1)] = (env.group(1), cells[2])
    return rows


RUN_OPTIONS = [
    p for p in cli.run.params if isinstance(p, click.Option) and p.envvar and p.name != "debug"
]


@pytest.mark.parametrize("option", RUN_OPTIONS, ids=lambda o: o.opts[0])
def test_every_run_setting_is_documented_with_its_variable_and_default(
    option: click.Option,
) -> None:
    rows = settings_rows()
    flag = option.opts[0]
    assert flag in rows, f"{flag} is missing from the README's settings table"
    env, default = rows[flag]
    assert env == option.envvar
    if isinstance(option.default, str) and option.default:
        assert option.default in default


@pytest.mark.parametrize("name", sorted(cli.main.commands))
def test_every_command_is_documented_and_has_help(name: str) -> None:
    command = cli.main.commands[name]
    assert f"`freezeframe {name}" in README
    assert command.help and "Example:" in command.help


def test_make_run_installs_only_what_running_needs() -> None:
    """`make run` is how a user tries freezeframe; the test tools are `make test`'s."""

    def installs(target: str) -> list[str]:
        printed = subprocess.run(
            ["make", "-n", "-B", target],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            cwd=Path(__file__).parents[1],
        ).stdout
        return [line for line in printed.splitlines() if "pip install" in line and " -e " in line]

    assert installs("run") == [".venv/bin/python -m pip install --quiet -e ."]
    assert any("'.[test,dev]'" in line for line in installs("test"))
