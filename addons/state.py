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


RECORDED_PACE = 1.0
INSTANT_PACE = 0.0


def parse_pace(value: str) -> float:
    """``recorded`` (1.0), ``instant`` (0.0), or a factor on every recorded delay: ``0.5``
    replays twice as fast, ``2`` half as fast."""
    text = value.strip().lower()
    if text == "recorded":
        return RECORDED_PACE
    if text == "instant":
        return INSTANT_PACE
    try:
        factor = float(text)
    except ValueError:
        factor = -1.0
    if not (0.0 < factor <= 1000.0):
        raise ValueError(f"replay pace {value!r}: use recorded, instant, or a factor such as 0.5")
    return factor


def format_pace(pace: float) -> str:
    if pace == RECORDED_PACE:
        return "recorded"
    if pace == INSTANT_PACE:
        return "instant"
    return f"{pace:g}"


class RuntimeState:
    """Mode, default cassette, replay pace, and the replay position of every (cassette, key).

    ``annotate`` is fixed for the process: whether answers carry addons.annotate's headers.
    """

    def __init__(
        self, mode: Mode, cassette: str, pace: float = RECORDED_PACE, annotate: bool = False
    ) -> None:
        self._lock = threading.Lock()
        self._mode = mode
        self._cassette = cassette
        self._pace = pace
        self.annotate = annotate
        self._served: Counter[tuple[str, str]] = Counter()

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def cassette(self) -> str:
        return self._cassette

    @property
    def pace(self) -> float:
        return self._pace

    def switch(
        self, mode: Mode | None = None, cassette: str | None = None, pace: float | None = None
    ) -> None:
        """Change mode, default cassette and/or pace; a switch starts replay from the top."""
        with self._lock:
            if mode is not None:
                self._mode = mode
            if cassette is not None:
                self._cassette = cassette
            if pace is not None:
                self._pace = pace
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
