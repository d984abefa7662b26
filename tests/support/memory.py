"""How much memory a process (the proxy) needs while something passes through it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

#: What the proxy may grow by while a 160 MiB body passes: well under the body's size.
GROWTH_LIMIT = 96 * 1024 * 1024


@contextmanager
def peak_rss(pid: int) -> Iterator[list[int]]:
    """Sample a process's resident memory every 20 ms; yields [baseline, peak]. A process
    that has ended (one refusing its input at once, on a busy machine, can end before the
    first sample) stays at what was sampled before, 0 if nothing was."""
    process = psutil.Process(pid)
    sample = [_rss(process)] * 2
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            sample[1] = max(sample[1], _rss(process))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield sample
    finally:
        done.set()
        watcher.join(5)


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.NoSuchProcess:  # ended (a zombie included)
        return 0
