"""The one error a file that cannot be read raises: which file, where in it, what is wrong.

The CLI prints it as one line, ``freezeframe: error: FILE: where: what``, so a user finds the
place without a traceback.
"""

from __future__ import annotations

from pathlib import Path


class FormatError(ValueError):
    """``path`` cannot be imported or verified: at ``where``, ``what``."""

    def __init__(self, path: Path | str, where: str, what: str) -> None:
        super().__init__(f"{path}: {where}: {what}")
        self.path = str(path)
        self.where = where
        self.what = what
