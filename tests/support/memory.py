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
    """Sample a process's resident memory every 20 ms; yields [baseline, peak]."""
    process = psutil.Process(pid)
    sample = [process.memory_info().rss] * 2
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            sample[1] = max(sample[1], process.memory_info().rss)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield sample
    finally:
        done.set()
        watcher.join(5)
