"""The one mutable object the addons and the admin API share.

Mode and default cassette can change at runtime (``PUT /api/mode``), and replay must
count how often each request key has been served so that the n-th occurrence gets the
n-th recording. Keeping both here, behind one lock, means a mode switch and the counter
reset that goes with it are seen together by every addon.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter


class Mode(enum.StrEnum):
    RECORD = "record"
    REPLAY = "replay"
    AUTO = "auto"
    PASSTHROUGH = "passthrough"

    @classmethod
    def parse(cls, value: str) -> Mode:
        try:
            return cls(value.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown mode {value!r}: choose one of {choices}") from None


class RuntimeState:
    """Mode, default cassette, and the replay position of every (cassette, key)."""

    def __init__(self, mode: Mode, cassette: str) -> None:
        self._lock = threading.Lock()
        self._mode = mode
        self._cassette = cassette
        self._served: Counter[tuple[str, str]] = Counter()

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def cassette(self) -> str:
        return self._cassette

    def switch(self, mode: Mode | None = None, cassette: str | None = None) -> None:
        """Change mode and/or default cassette; a switch starts replay from the top."""
        with self._lock:
            if mode is not None:
                self._mode = mode
            if cassette is not None:
                self._cassette = cassette
            self._served.clear()

    def next_occurrence(self, cassette: str, key: str) -> int:
        """Claim the next replay position for this key: 0 for the first request, and so on."""
        with self._lock:
            slot = (cassette, key)
            n = self._served[slot]
            self._served[slot] = n + 1
            return n

    def reset(self) -> None:
        with self._lock:
            self._served.clear()
