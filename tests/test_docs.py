"""The README and docs/ are the user-facing surface: every command, flag and variable must be
in them, with the environment variable and default the code really uses (datasette's
test_docs); the CLI reference is generated from the click app and must match it; every shell
block is run by a test or says it is illustrative."""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path

import click
import pytest

from freezeframe import cli

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
SETTINGS = DOCS["settings.md"]
#: A fenced block of commands must be followed by one of these, naming the test that runs it.
MARKER = re.compile(r"<!-- (illustrative\b[^>]*|run-by: (?P<file>[\w/.]+)::(?P<test>\w+)) -->")
SHELL_FENCE = re.compile(r"^```(sh|console|bash|shell)\n.*?^```\n(?P<after>\n*[^\n]*)", re.M | re.S)


def settings_rows() -> dict[str, tuple[str, str]]:
    """flag -> (environment variable, default) from docs/settings.md's table."""
    rows = {}
    for line in SETTINGS.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`--"):
            flag = re.match(r"`(--[a-z-]+)", cells[0])
            env = re.match(r"`(FREEZEFRAME_[A-Z_]+)`", cells[1])
            if flag and env:
                rows[flag.group(1)] = (env.group(1), cells[2])
    return rows


RUN_OPTIONS = [
    p
    for p in cli.main.commands["run"].params
    if isinstance(p, click.Option) and p.envvar and p.name != "debug"
]


@pytest.mark.parametrize("option", RUN_OPTIONS, ids=lambda o: o.opts[0])
def test_every_run_setting_is_documented_with_its_variable_and_default(
    option: click.Option,
) -> None:
    rows = settings_rows()
    flag = option.opts[0]
    assert flag in rows, f"{flag} is missing from docs/settings.md's settings table"
    env, default = rows[flag]
    assert env == option.envvar
    if isinstance(option.default, str) and option.default:
        assert option.default in default


@pytest.mark.parametrize("name", sorted(cli.main.commands))
def test_every_command_is_documented_and_has_help(name: str) -> None:
    command = cli.main.commands[name]
    assert f"### `freezeframe {name}`" in DOCS["cli.md"]
    assert command.help and "Example:" in command.help


def test_the_cli_reference_is_the_click_app_s_own() -> None:
    """docs/cli.md below its marker is what scripts/cli_reference.py writes from the app."""
    generate = runpy.run_path(str(ROOT / "scripts" / "cli_reference.py"))
    assert DOCS["cli.md"] == generate["page"](DOCS["cli.md"]), (
        "docs/cli.md is stale: run python scripts/cli_reference.py"
    )


def test_the_readme_is_short_and_links_pages_that_exist() -> None:
    assert len(README.splitlines()) <= 400
    for target in re.findall(r"\]\((docs/[\w.-]+\.md)", README):
        assert (ROOT / target).exists(), target
    for name, text in DOCS.items():
        for target in re.findall(r"\]\(([\w.-]+\.(?:md|png))(?:#[\w-]+)?\)", text):
            assert (ROOT / "docs" / target).exists(), f"docs/{name} links {target}"


LINK = re.compile(r"\]\((?!https?://|mailto:|#)(?P<target>[^)\s#]+)(?:#(?P<anchor>[\w-]+))?\)")


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces
    as hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize(
    "name",
    ["README.md", "docker/README.md", *(f"docs/{n}" for n in DOCS)],
)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(name: str) -> None:
    """Any file, not only pages: docs/evidence.md linked the jsonl schema from the wrong
    folder, and docker/README pointed at a README section that had moved (issue 32)."""
    page = ROOT / name
    for link in LINK.finditer(page.read_text()):
        target = (page.parent / link["target"]).resolve()
        assert target.exists(), f"{name} links {link['target']}, which does not exist"
        if link["anchor"] and target.suffix == ".md":
            assert link["anchor"] in _anchors(target.read_text()), (
                f"{name} links {link['target']}#{link['anchor']}: no such heading"
            )


@pytest.mark.parametrize("name", ["README.md", *(f"docs/{n}" for n in DOCS)])
def test_every_shell_block_is_run_by_a_test_or_marked_illustrative(name: str) -> None:
    text = (ROOT / name).read_text()
    for block in SHELL_FENCE.finditer(text):
        line = text[: block.start()].count("\n") + 1
        marker = MARKER.match(block.group("after").strip())
        assert marker, f"{name}:{line}: a shell block with no run-by or illustrative marker"
        if marker.group("file"):
            test_file = ROOT / marker.group("file")
            assert f"def {marker.group('test')}(" in test_file.read_text(), (
                f"{name}:{line}: {marker.group('file')} has no {marker.group('test')}"
            )


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

    assert installs("run") == [
        ".venv/bin/python -m pip install --quiet --config-settings editable_mode=strict -e ."
    ]
    assert any("'.[test,dev]'" in line for line in installs("test"))


def test_the_readme_speed_section_says_what_a_user_gains_and_costs() -> None:
    """A user reads what recording costs and replay gains; the maintainers' tables (commit
    hashes, pinned runs, goals not met) are in docs/ (issue 32)."""
    section = README.split("## Speed\n", 1)[1].split("\n## ", 1)[0]
    assert "|" not in section, "no tables in the README's Speed"
    assert not re.search(r"\b[0-9a-f]{7,40}\b", section), "no commit hashes"
    assert "(docs/development.md#speed)" in section
    assert len(section.split()) <= 90
