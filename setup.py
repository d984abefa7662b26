"""What pyproject.toml cannot say: ``cli.py``, at the top of the checkout, is
``freezeframe.cli`` in the wheel (``package-dir`` maps folders only, not a single module)."""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """Adds ``cli.py`` to the ``freezeframe`` package's modules; the wheel and the strict
    editable install's link tree both take their files from this list."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        if package == "freezeframe":
            modules.append(("freezeframe", "cli", "cli.py"))
        return modules


setup(cmdclass={"build_py": BuildPy})
