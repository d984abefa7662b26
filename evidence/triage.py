"""Failing runs, grouped by what went wrong: the failures each run shows, and the groups of
runs that failed the same way.

A run is a cassette, or ``cassette@run_id`` where the traffic carried a run id
(``X-Freezeframe-Run-Id``). Its failures are those its exchanges carry (evidence.signatures,
stored with each exchange) and those only the run as a whole shows, read from the model
calls' stored traces, never from a body:

- ``loop``: one tool asked for LOOP_MIN or more times in a row with nearly the same
  arguments (evidence.loops' rule: other tools in between do not break the run, the same
  tool with other arguments does);
- ``context``: a system prompt, or the first message, present in one model call of the run
  and gone from the next call of the same API while the conversation goes on (the next call
  carries more than one message);
- ``ignored_tool_error``: a tool answered >= 400 and the run's next model call went on
  without mentioning it: the messages the client added since the model last spoke carry
  neither the status nor an error word. The tool's failure is then read as this kind, not as
  ``tool_error``: it is the more telling reading of the same exchange.

A group is every failure with one signature; a healthy run is in no group.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from freezeframe.evidence.conversation import conversations_of
from freezeframe.evidence.loops import LOOP_MIN
from freezeframe.evidence.signatures import (
    CONTEXT,
    IGNORED_TOOL_ERROR,
    KINDS,
    LOOP,
    SIGNATURE_VERSION,
    TOOL_ERROR,
    Trace,
    plain_call,
    signals_of,
    trace_of,
)
from freezeframe.evidence.toolschema import violations
from freezeframe.storage import (
    CassetteNotFound,
    Exchange,
    ExchangeNotFound,
    Signals,
    Store,
    TriageRow,
)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One failure in one run."""

    kind: str
    signature: str
    cassette: str
    run: str
    """``cassette`` or ``cassette@run_id``."""
    seq: int
    """The exchange to look at first: the failing one, or where a run-level failure shows."""
    at: float
    spans: tuple[int, ...] = ()
    """Every step a run-level failure spans (a loop's calls; the calls before and after
    dropped context); () for an exchange's own failure."""


@dataclass(frozen=True, slots=True)
class Group:
    """Every failure with one signature, and the runs they happened in."""

    signature: str
    kind: str
    occurrences: tuple[Occurrence, ...]
    runs: tuple[str, ...] = field(default=())

    @property
    def count(self) -> int:
        return len(self.occurrences)

    @property
    def first_seen(self) -> float:
        return min(o.at for o in self.occurrences)

    @property
    def last_seen(self) -> float:
        return max(o.at for o in self.occurrences)

    @property
    def example(self) -> Occurrence:
        """The earliest failure: the one to open first."""
        return min(self.occurrences, key=lambda o: (o.at, o.cassette, o.seq))


def run_name(cassette: str, run_id: str | None) -> str:
    """How a run is named: its cassette, with ``@run_id`` when the traffic carried one."""
    return f"{cassette}@{run_id}" if run_id else cassette


def occurrences(rows: Iterable[TriageRow]) -> Iterator[Occurrence]:
    """Every failure of the runs ``rows`` come from (rows in cassette and seq order)."""
    runs: dict[tuple[str, str | None], list[TriageRow]] = {}
    for row in rows:
        runs.setdefault((row.cassette, row.run_id), []).append(row)
    for (cassette, run_id), found in runs.items():
        yield from run_failures(cassette, run_name(cassette, run_id), found)


def run_failures(cassette: str, run: str, rows: Sequence[TriageRow]) -> Iterator[Occurrence]:
    """The failures of one run, from its rows in seq order."""
    models = [(row, trace) for row in rows if (trace := trace_of(row.trace)) is not None]
    for row in rows:
        if row.kind is None or row.signature is None:
            continue
        signature, kind = row.signature, row.kind
        if kind == TOOL_ERROR and _ignored(row, models):
            signature, kind = IGNORED_TOOL_ERROR + signature[len(TOOL_ERROR) :], IGNORED_TOOL_ERROR
        yield Occurrence(kind, signature, cassette, run, row.seq, row.started_at)
    yield from _loops(cassette, run, models)
    yield from _dropped(cassette, run, models)


def _ignored(row: TriageRow, models: Sequence[tuple[TriageRow, Trace]]) -> bool:
    """The run's next model call after a tool's error went on without mentioning it."""
    after = next((trace for model, trace in models if model.seq > row.seq), None)
    if after is None:
        return False  # the run ended there: nothing went on past it
    return not after.mentions(_status(row.signature or ""))


def _status(signature: str) -> int | None:
    """The status in a tool error's signature: ``tool_error METHOD host/path STATUS...``."""
    words = signature.split(" ", 4)
    if len(words) >= 4 and words[3].rstrip(":").isdigit():
        return int(words[3].rstrip(":"))
    return None


def _loops(
    cassette: str, run: str, models: Sequence[tuple[TriageRow, Trace]]
) -> Iterator[Occurrence]:
    running: dict[str, tuple[str, list[tuple[int, float]]]] = {}
    found: list[tuple[str, list[tuple[int, float]]]] = []
    for row, trace in models:
        for name, key in trace.tool_calls():
            current = running.get(name)
            if current is None or current[0] != key:
                if current is not None and len(current[1]) >= LOOP_MIN:
                    found.append((name, current[1]))
                current = running[name] = (key, [])
            current[1].append((row.seq, row.started_at))
    found += [(name, calls) for name, (_, calls) in running.items() if len(calls) >= LOOP_MIN]
    for name, calls in sorted(found, key=lambda item: item[1][0]):
        signature = f"{LOOP} {name}: the same arguments {LOOP_MIN} or more times in a row"
        seqs = tuple(dict.fromkeys(seq for seq, _ in calls))
        yield Occurrence(LOOP, signature, cassette, run, calls[0][0], calls[0][1], seqs)


def _dropped(
    cassette: str, run: str, models: Sequence[tuple[TriageRow, Trace]]
) -> Iterator[Occurrence]:
    last: dict[str, tuple[TriageRow, Trace]] = {}
    for row, trace in models:
        api = trace.api
        before = last.get(api)
        last[api] = (row, trace)
        if before is None or trace.carried() <= 1:  # a new conversation, not one going on
            continue
        gone = _gone(before[1], trace)
        if gone is None:
            continue
        signature = f"{CONTEXT} {api}: the {gone} was dropped from the conversation"
        spans = (before[0].seq, row.seq)
        yield Occurrence(CONTEXT, signature, cassette, run, row.seq, row.started_at, spans)


def _gone(before: Trace, now: Trace) -> str | None:
    if before.system and before.system != now.system:
        return "system prompt"
    if before.first and before.first != now.first:
        return "first message"
    return None


def groups(rows: Iterable[TriageRow], kind: str | None = None) -> list[Group]:
    """The failure groups of the runs ``rows`` come from, largest (most failures) first;
    only those of ``kind`` when given."""
    by_signature: dict[str, list[Occurrence]] = {}
    for found in occurrences(rows):
        if kind is None or found.kind == kind:
            by_signature.setdefault(found.signature, []).append(found)
    result = [
        Group(
            signature,
            found[0].kind,
            tuple(sorted(found, key=lambda o: (o.at, o.cassette, o.seq))),
            tuple(sorted({o.run for o in found})),
        )
        for signature, found in by_signature.items()
    ]
    result.sort(key=lambda g: (-g.count, -len(g.runs), g.signature))
    return result


def group_document(group: Group, *, detail: bool = False) -> dict[str, Any]:
    """One group as ``triage --json`` and ``/triage.json`` give it; with ``detail``, every
    occurrence too (the case file's page)."""
    example = group.example
    document: dict[str, Any] = {
        "signature": group.signature,
        "kind": group.kind,
        "count": group.count,
        "runs": list(group.runs),
        "first_seen": group.first_seen,
        "last_seen": group.last_seen,
        "example": {"cassette": example.cassette, "seq": example.seq},
    }
    if detail:
        document["occurrences"] = [
            {
                "run": o.run,
                "cassette": o.cassette,
                "seq": o.seq,
                "at": o.at,
                "spans": list(o.spans),
            }
            for o in group.occurrences
        ]
    return document


def triage_document(found: Sequence[Group], *, detail: bool = False) -> dict[str, Any]:
    return {"groups": [group_document(g, detail=detail) for g in found]}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``90s``, ``30m``, ``6h``, ``2d``, ``1w`` or a sum (``1h30m``).
    Raises ValueError naming the text."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not parts or _DURATION.sub("", cleaned).strip():
        raise ValueError(
            f"--since {text!r}: not a duration; write a number and a unit, e.g. 30m, 6h, 2d"
        )
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def find_groups(
    store: Store,
    *,
    since: float | None = None,
    pattern: str | None = None,
    kind: str | None = None,
    now: float | None = None,
) -> list[Group]:
    """The failure groups of the runs in ``store``: of the cassettes whose names match the
    glob ``pattern`` (all when None), over the last ``since`` seconds (all time when None),
    only those of ``kind`` when given."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"--kind {kind!r}: not a failure kind; one of {', '.join(KINDS)}")
    names = None
    if pattern is not None:
        names = [n for n in store.cassette_names() if fnmatch.fnmatchcase(n, pattern)]
    after = None if since is None else (time.time() if now is None else now) - since
    return groups(store.triage_rows(since=after, cassettes=names), kind)


def find_group(store: Store, signature: str) -> Group:
    """The group with exactly this signature; ValueError naming the nearest when none."""
    found = find_groups(store)
    for group in found:
        if group.signature == signature:
            return group
    near = [g.signature for g in found if signature.strip().lower() in g.signature.lower()]
    hint = f"; did you mean {near[0]!r}?" if len(near) == 1 else ""
    raise ValueError(f"no failure group has the signature {signature!r}{hint}")


def rebuild(store: Store, advance: Callable[[int], None] = lambda _: None) -> int:
    """Work out again the signals of every exchange whose signals are missing or older than
    SIGNATURE_VERSION (a store recorded before triage, or by older rules), one cassette at
    a time; ``advance`` is told of each exchange done. Returns how many were rewritten."""
    pending: dict[str, list[int]] = {}
    for cassette, seq in store.unsigned(SIGNATURE_VERSION):
        pending.setdefault(cassette, []).append(seq)
    done = 0
    for cassette, seqs in pending.items():
        found: dict[int, Signals] = {}
        for seq in seqs:
            try:
                found[seq] = signals_of(store.exchange(cassette, seq))
            except (CassetteNotFound, ExchangeNotFound):
                pass  # removed meanwhile: nothing to sign
            advance(1)
        store.store_signals(cassette, found)
        done += len(found)
    return done


def pending_count(store: Store) -> int:
    """Exchanges whose signals are missing or from older rules (``triage --rebuild``)."""
    return len(store.unsigned(SIGNATURE_VERSION))


TIMELINE_BUCKETS = 24
"""Bars in a group's counts over time: the span of every group shown, cut in equal parts."""


def timeline(found: Sequence[Group], buckets: int = TIMELINE_BUCKETS) -> dict[str, Any]:
    """Each group's failures counted over one common span (the case file's bars): the span's
    start and end, and per signature the count in each of ``buckets`` equal parts."""
    if not found:
        return {"start": None, "end": None, "counts": {}}
    start = min(g.first_seen for g in found)
    end = max(g.last_seen for g in found)
    width = (end - start) / buckets or 1.0
    counts: dict[str, list[int]] = {}
    for group in found:
        bars = [0] * buckets
        for o in group.occurrences:
            bars[min(int((o.at - start) / width), buckets - 1)] += 1
        counts[group.signature] = bars
    return {"start": start, "end": end, "counts": counts}


def run_marks(rows: Iterable[TriageRow], exchanges: Sequence[Exchange]) -> dict[str, Any]:
    """What the steps page marks on one cassette's steps: every failure of its runs with
    the steps it spans, and each schema violation with the rule it broke."""
    failures = [
        {
            "kind": o.kind,
            "signature": o.signature,
            "run": o.run,
            "seq": o.seq,
            "spans": list(o.spans) or [o.seq],
        }
        for o in occurrences(rows)
    ]
    broken: dict[int, list[dict[str, str]]] = {}
    for exchange, conversation in zip(exchanges, conversations_of(exchanges), strict=True):
        if conversation is None or conversation.answer is None:
            continue
        calls = tuple(plain_call(call) for call in conversation.answer.tool_calls)
        for v in violations(calls, conversation.tools):
            broken.setdefault(exchange.seq, []).append(
                {
                    "tool": v.tool,
                    "rule": v.rule,
                    "path": v.path,
                    "expected": v.expected,
                    "message": v.message,
                }
            )
    return {"failures": failures, "violations": {str(k): v for k, v in broken.items()}}
