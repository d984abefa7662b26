"""Where the output of the commands freezeframe runs goes, when it is not the terminal's.

``exec --runs --json`` and ``recheck --json`` print one JSON document on stdout, so the
command they run writes to stderr meanwhile; ``recheck`` without ``-v`` writes the command's
output and the proxies' logs to a log file and prints one line per run. These move the
process's own file descriptors 1 and 2, so every child and every log handler follows.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from freezeframe.evidence.inert import inert


def details_file(what: str) -> Path:
    """A new log file (0600) for what a command runs says, beside the others of its kind."""
    handle, name = tempfile.mkstemp(prefix=f"freezeframe-{what}-", suffix=".log")
    os.close(handle)
    return Path(name)


@contextlib.contextmanager
def output_to(path: Path | None, say: Callable[[str], None]) -> Iterator[Callable[[str], None]]:
    """While open, the process's stdout and stderr (its log, and every command it runs)
    write to ``path``; what it yields writes an inert line to the real stdout. With None,
    nothing moves and it yields ``say``."""
    if path is None:
        yield say
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    aside = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.dup2(aside, 1)
    os.dup2(aside, 2)
    os.close(aside)

    def said(line: str) -> None:
        os.write(saved[0], (inert(line, newlines=False) + "\n").encode())

    try:
        yield said
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


@contextlib.contextmanager
def output_to_stderr(moved: bool) -> Iterator[None]:
    """When ``moved``, the output of the commands run meanwhile goes to stderr, so that
    stdout is the one JSON document."""
    if not moved:
        yield
        return
    stdout = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(stdout, 1)
        os.close(stdout)
