"""The one mutable object the addons and the admin API share.

Mode and default cassette can change at runtime (``PUT /api/mode``), and replay must
count how often each request key has been served so that the n-th occurrence gets the
n-th recording. Keeping both here, behind one lock, means a mode switch and the counter
reset that goes with it are seen together by every addon.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter, deque
from dataclasses import asdict, dataclass
from typing import Any

from freezeframe.canonicalize.drift import described
from freezeframe.evidence.response_ids import IdMap
from freezeframe.storage import ReplayStore


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


class Tally:
    """What this process has done: recorded (by host, status and outcome), replayed and
    drifted (by cassette), missed (by cassette).

    The proxy logs it when it stops, ``/health`` reports its totals and ``/metrics`` its
    counts by label, so a run that recorded nothing, or missed, says so without anyone
    reading the log line by line.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recorded: Counter[tuple[str, str, str]] = Counter()
        self._replayed: Counter[str] = Counter()
        self._drifted: Counter[str] = Counter()
        self._missed: Counter[str] = Counter()

    def recorded(self, outcome: str, host: str, status: int | None) -> None:
        """An exchange stored; ``status`` None when no answer came (a failed exchange)."""
        with self._lock:
            self._recorded[(host, "" if status is None else str(status), outcome)] += 1

    def replayed(self, cassette: str, drifted: bool) -> None:
        with self._lock:
            self._replayed[cassette] += 1
            self._drifted[cassette] += drifted

    def missed(self, cassette: str) -> None:
        with self._lock:
            self._missed[cassette] += 1

    def counts(self) -> TallyCounts:
        """A copy of every count by its labels, taken at once."""
        with self._lock:
            return TallyCounts(
                Counter(self._recorded),
                Counter(self._replayed),
                Counter(self._drifted),
                Counter(self._missed),
            )

    def document(self) -> dict[str, object]:
        counts = self.counts()
        by_outcome: Counter[str] = Counter()
        for (_, _, outcome), n in counts.recorded.items():
            by_outcome[outcome] += n
        return {
            "recorded": by_outcome.total(),
            "recorded_by_outcome": dict(sorted(by_outcome.items())),
            "replayed": counts.replayed.total(),
            "missed": counts.missed.total(),
            "drifted": counts.drifted.total(),
        }

    def summary(self) -> str:
        """One line: ``recorded 12 (10 complete, 2 truncated), replayed 0, missed 1, ...``."""
        document = self.document()
        by_outcome = document["recorded_by_outcome"]
        assert isinstance(by_outcome, dict)
        outcomes = ", ".join(f"{n} {outcome}" for outcome, n in by_outcome.items())
        return (
            f"recorded {document['recorded']}{f' ({outcomes})' if outcomes else ''}, "
            f"replayed {document['replayed']}, missed {document['missed']}, "
            f"drifted {document['drifted']}"
        )


@dataclass(frozen=True)
class TallyCounts:
    """Tally's counts by label: recorded by (host, status, outcome), the rest by cassette."""

    recorded: Counter[tuple[str, str, str]]
    replayed: Counter[str]
    drifted: Counter[str]
    missed: Counter[str]


@dataclass(frozen=True, slots=True)
class Event:
    """One request as the proxy handled it: ``hit`` (replayed from ``cassette#seq``),
    ``miss`` (``message`` says why), or ``recorded`` (stored as ``cassette#seq``)."""

    n: int
    kind: str
    cassette: str
    seq: int | None
    method: str
    url: str
    status: int | None = None
    drift: tuple[str, ...] = ()
    """On a hit: the stripped parts in which the request differed from the recording."""
    perturbed: str | None = None
    """On a hit whose answer was perturbed (``--perturb``): the perturbation."""
    message: str = ""
    drift_values: tuple[tuple[str, str, str], ...] = ()
    """On a hit, for each drifted part whose values can be shown (a JSON body field): the
    part, its recorded value and its live one, both as stored (redacted), cut short as
    canonicalize.drift.drift_values cuts them."""

    def document(self) -> dict[str, Any]:
        values = [
            {"path": path, "recorded": recorded, "live": live}
            for path, recorded, live in self.drift_values
        ]
        return {**asdict(self), "drift": list(self.drift), "drift_values": values}

    def drift_said(self) -> str:
        """The drifted parts as people read them, each with its values where known."""
        values = {path: (recorded, live) for path, recorded, live in self.drift_values}
        return ", ".join(described(path, values.get(path)) for path in self.drift)


JOURNAL_KEPT = 10_000


class Journal:
    """The latest requests the proxy handled, numbered from 1, so a caller that noted the
    last number before a test (the pytest plugin, ``exec --runs``) can ask what happened
    during it (``GET /api/events?after=N``). The oldest are dropped past ``JOURNAL_KEPT``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: deque[Event] = deque(maxlen=JOURNAL_KEPT)
        self._last = 0

    def add(
        self, kind: str, cassette: str, seq: int | None, method: str, url: str, **rest: Any
    ) -> None:
        with self._lock:
            self._last += 1
            self._events.append(Event(self._last, kind, cassette, seq, method, url, **rest))

    @property
    def last(self) -> int:
        with self._lock:
            return self._last

    def after(self, n: int) -> list[Event]:
        with self._lock:
            return [event for event in self._events if event.n > n]


class SharedPositions:
    """Replay positions counted in the store, so proxy replicas that replay one session
    together (``--replay-session``) hand out each recording once, in order per key."""

    def __init__(self, store: ReplayStore, session: str) -> None:
        self._store = store
        self.session = session

    def next(self, cassette: str, key: str) -> int:
        return self._store.claim(self.session, cassette, key)

    def reset(self) -> None:
        self._store.release(self.session)


class RuntimeState:
    """Mode, default cassette, replay pace, and the replay position of every (cassette, key).

    ``annotate`` is fixed for the process: whether answers carry addons.annotate's headers.
    ``miss_details`` too: whether a miss answer quotes the recorded values it differs from
    (answers.miss), which only a proxy private to one run should tell its clients.
    ``tally`` counts what the process did, ``journal`` lists it request by request.
    """

    def __init__(
        self,
        mode: Mode,
        cassette: str,
        pace: float = RECORDED_PACE,
        annotate: bool = False,
        shared: SharedPositions | None = None,
        *,
        miss_details: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._mode = mode
        self._cassette = cassette
        self._pace = pace
        self.annotate = annotate
        self.miss_details = miss_details
        self.tally = Tally()
        self.journal = Journal()
        self._shared = shared
        self._served: Counter[tuple[str, str]] = Counter()
        self._diverged: set[str] = set()
        self._response_ids: dict[str, IdMap] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        """How many times replay has started from the top (a switch or a reset): what
        replay loaded from the store before the last one is read again."""
        return self._generation

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
            self._diverged.clear()
            self._response_ids.clear()
            self._generation += 1
        if self._shared is not None:
            self._shared.reset()

    def response_ids(self, cassette: str) -> IdMap:
        """The live Responses API ids of this replay and the recorded ones they stand
        for (evidence.response_ids), per cassette; forgotten when replay starts over."""
        with self._lock:
            return self._response_ids.setdefault(cassette, IdMap())

    def diverged(self, run: str) -> bool:
        """Whether the run (its run id, or "" for requests without one) has missed since
        replay last started from the top."""
        with self._lock:
            return run in self._diverged

    def diverge(self, run: str) -> None:
        with self._lock:
            self._diverged.add(run)

    def next_occurrence(self, cassette: str, key: str) -> int:
        """Claim the next replay position for this key: 0 for the first request, and so on;
        in the store when replicas share the session."""
        if self._shared is not None:
            return self._shared.next(cassette, key)
        with self._lock:
            slot = (cassette, key)
            n = self._served[slot]
            self._served[slot] = n + 1
            return n

    def give_back(self, cassette: str, key: str, occurrence: int) -> None:
        """Return a position that was claimed and not served (the store failed), when it
        is still the last one claimed; positions counted in the store stay taken."""
        if self._shared is not None:
            return
        with self._lock:
            slot = (cassette, key)
            if self._served[slot] == occurrence + 1:
                self._served[slot] = occurrence

    def reset(self) -> None:
        with self._lock:
            self._served.clear()
            self._diverged.clear()
            self._response_ids.clear()
            self._generation += 1
        if self._shared is not None:
            self._shared.reset()
