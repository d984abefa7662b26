"""Every import of the project's own packages goes through ``freezeframe``: a bare
``from storage import ...`` works in the checkout (its root is on the path) but, installed,
would import whatever ``storage`` the user's project has."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_the_package_links_every_top_level_folder_of_the_project() -> None:
    linked = {
        p.name.removesuffix(".py") for p in (ROOT / "freezeframe").iterdir() if p.is_symlink()
    }
    assert linked == OURS
    for name in OURS:
        target = ROOT / "freezeframe" / (name + ".py" if name == "cli" else name)
        assert target.resolve().parent == ROOT, name
