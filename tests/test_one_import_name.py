"""Every import of the project's own packages goes through ``freezeframe``: a bare
``from storage import ...`` works in the checkout (its root is on the path) but, installed,
would import whatever ``storage`` the user's project has."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
OURS = {
    "addons",
    "canonicalize",
    "cli",
    "commands",
    "evidence",
    "exchange_formats",
    "providers",
    "proxy",
    "sandbox",
    "storage",
    "whatif",
}
SKIP = {".venv", "node_modules", ".git", "freezeframe", "build"}


def sources() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not SKIP & set(path.relative_to(ROOT).parts[:-1]) and not path.is_symlink()
    ]


def test_no_module_imports_a_package_of_ours_by_its_bare_name() -> None:
    bare = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            bare += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in OURS
            ]
    assert bare == []


def test_the_wheel_maps_every_top_level_folder_of_the_project_into_freezeframe() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"freezeframe"}
    assert folders == OURS - {"cli"}
    assert setuptools["package-dir"] == {f"freezeframe.{name}": name for name in folders}
    assert '("freezeframe", "cli", "cli.py")' in (ROOT / "setup.py").read_text()
    assert not [path for path in (ROOT / "freezeframe").iterdir() if path.is_symlink()]


@pytest.mark.parametrize("name", sorted(OURS))
def test_a_package_of_ours_refuses_its_bare_name(name: str) -> None:
    """``import storage`` in the checkout (its root on the path) would load every module of
    ``storage/`` a second time, beside ``freezeframe.storage``'s: one ``except`` of the one
    class would miss the other's. It fails at once, saying which name to use."""
    bare = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bare.returncode == 1
    assert bare.stderr.splitlines()[-1] == (
        f"ImportError: import freezeframe.{name}, not {name}: one name, one module"
    )
    imported = subprocess.run(
        [sys.executable, "-c", f"import freezeframe.{name}, sys; print(sorted(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert name not in imported.stdout.split("'")


def test_the_checkout_imports_its_folders_under_their_own_paths() -> None:
    """In a checkout freezeframe's packages are the folders at its top, wherever freezeframe
    itself was found: tracebacks name ``storage/errors.py``, and a new module is seen without
    installing again."""
    import freezeframe.storage.errors

    assert Path(freezeframe.storage.errors.__file__) == ROOT.resolve() / "storage" / "errors.py"
