"""The permissions of the files freezeframe creates that hold recorded traffic.

A store holds every prompt and answer it recorded, and an export or a bundle carries the same:
they are as private as the CA key and ``secret.key`` (0600), so they are created readable by
their owner only, whatever the umask. A user who shares them on purpose (a group that reads
the store, say) sets ``FREEZEFRAME_FILE_MODE`` (octal, e.g. ``640``). SQLite gives a
store's ``-wal`` and ``-shm`` files the mode of the store itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

FILE_MODE_VARIABLE = "FREEZEFRAME_FILE_MODE"
DEFAULT_FILE_MODE = 0o600


def file_mode() -> int:
    """The mode for new files of recorded traffic; ValueError naming the variable if bad."""
    text = os.environ.get(FILE_MODE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_FILE_MODE
    try:
        mode = int(text.removeprefix("0o"), 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777 or not mode & 0o600 == 0o600:
        raise ValueError(
            f"{FILE_MODE_VARIABLE}={text!r}: expected an octal file mode that lets its owner "
            "read and write, such as 600 (the default) or 640"
        )
    return mode


def create_private(path: Path) -> None:
    """Create ``path`` empty with ``file_mode()`` unless it exists (which is left as it is)."""
    mode = file_mode()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return
    try:
        os.fchmod(descriptor, mode)  # exactly the mode, whatever the umask took away
    finally:
        os.close(descriptor)


def open_private(path: Path) -> BinaryIO:
    """``open(path, "wb")``, the file (new or truncated) given ``file_mode()``."""
    mode = file_mode()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(descriptor, mode)
    except OSError:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "wb")
