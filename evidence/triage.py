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

These are read from the model calls' stored traces (evidence.signatures.Trace), never from a
body, as a run's exchanges come (RunReaders: on the record path, on import, on ``triage
--rebuild``), and stored with the exchange that showed them; so triage reads only failing
exchanges (stored_occurrences), and a store of 200,000 exchanges is triaged in milliseconds.
The steps page reads a run's traces whole (occurrences), to mark every step a failure spans.

A group is every failure with one signature; a healthy run is in no group.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import json
import re
import time
from collections import OrderedDict
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
    with_signals,
)
from freezeframe.evidence.toolschema import violations
from freezeframe.storage import (
    CassetteNotFound,
    Exchange,
    ExchangeNotFound,
    Imported,
    NewExchange,
    ReadStore,
    RecheckResult,
    Signals,
    TriageRow,
    WriteStore,
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
    of_run: bool = False
    """Only the run shows it (a loop, dropped context, an ignored tool error)."""


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


def run_failures(
    cassette: str,
    run: str,
    rows: Sequence[TriageRow],
    models: Sequence[tuple[TriageRow, Trace]] | None = None,
) -> Iterator[Occurrence]:
    """The failures of one run, from its rows in seq order; ``models``, the model calls among
    them with their traces read, when the caller keeps them read (RunReaders)."""
    if models is None:
        models = [(row, trace) for row in rows if (trace := trace_of(row.trace)) is not None]
    for row in rows:
        if row.kind is None or row.signature is None:
            continue
        signature, kind = row.signature, row.kind
        if kind == TOOL_ERROR and _ignored(row, models):
            ignored = IGNORED_TOOL_ERROR + signature[len(TOOL_ERROR) :]
            yield Occurrence(
                IGNORED_TOOL_ERROR, ignored, cassette, run, row.seq, row.started_at, of_run=True
            )
            continue
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
        yield _loop(cassette, run, name, calls)


def _loop(cassette: str, run: str, name: str, calls: Sequence[tuple[int, float]]) -> Occurrence:
    """The loop of ``calls`` (seq and start of each) to one tool with the same arguments."""
    signature = f"{LOOP} {name}: the same arguments {LOOP_MIN} or more times in a row"
    seqs = tuple(dict.fromkeys(seq for seq, _ in calls))
    return Occurrence(LOOP, signature, cassette, run, calls[0][0], calls[0][1], seqs, True)


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
        if gone is not None:
            yield _context(cassette, run, api, gone, before[0], row)


def _context(
    cassette: str, run: str, api: str, gone: str, before: TriageRow, row: TriageRow
) -> Occurrence:
    """The ``gone`` part of a conversation dropped between two calls to one API."""
    signature = f"{CONTEXT} {api}: the {gone} was dropped from the conversation"
    spans = (before.seq, row.seq)
    return Occurrence(CONTEXT, signature, cassette, run, row.seq, row.started_at, spans, True)


def _gone(before: Trace, now: Trace) -> str | None:
    if before.system and before.system != now.system:
        return "system prompt"
    if before.first and before.first != now.first:
        return "first message"
    return None


def stored_occurrences(rows: Iterable[TriageRow]) -> Iterator[Occurrence]:
    """Every failure the failing rows carry: each exchange's own, and those its run showed
    when it came (RunReaders, stored in ``run_failures``). A tool's error that its run
    went on past is read as the ignored tool error alone."""
    found = list(rows)
    ignored: set[tuple[str, str | None, int]] = set()
    for row in found:
        for line in (row.run_failures or "").splitlines():
            kind, seq, at, signature = line.split("\t", 3)
            if kind == IGNORED_TOOL_ERROR:
                ignored.add((row.cassette, row.run_id, int(seq)))
            run = run_name(row.cassette, row.run_id)
            yield Occurrence(kind, signature, row.cassette, run, int(seq), float(at), of_run=True)
    for row in found:
        if row.kind is None or row.signature is None:
            continue
        if row.kind == TOOL_ERROR and (row.cassette, row.run_id, row.seq) in ignored:
            continue
        run = run_name(row.cassette, row.run_id)
        yield Occurrence(row.kind, row.signature, row.cassette, run, row.seq, row.started_at)


RUNS_KEPT = 2_000
"""Runs a RunReaders keeps at once, the least recently seen dropped first."""
ROWS_KEPT = 200
"""Model calls and failing exchanges of one run it keeps (the others cannot show a run's
failure): a loop or a dropped message is seen within these. With RUNS_KEPT, this bounds
what a recording proxy holds to some tens of megabytes at worst."""


class _Run:
    """One run as a RunReaders holds it: its last rows, its model calls among them with
    their traces read once, what was found, and where its reading stopped (the runs of
    equal tool calls, each API's last call, the tool errors since the last model call), so
    that a row that comes after all the others is read on its own."""

    __slots__ = ("rows", "models", "found", "running", "last_call", "tool_errors")

    def __init__(self) -> None:
        self.rows: list[TriageRow] = []
        self.models: list[tuple[TriageRow, Trace]] = []
        self.found: set[tuple[str, str, int]] = set()
        self.running: dict[str, tuple[str, list[tuple[int, float]]]] = {}
        self.last_call: dict[str, tuple[TriageRow, Trace]] = {}
        self.tool_errors: list[TriageRow] = []

    def add(self, row: TriageRow, trace: Trace | None) -> bool:
        """Keep ``row``; True if it came after every row kept (then ``step`` reads it)."""
        after = not self.rows or row.seq > self.rows[-1].seq
        bisect.insort(self.rows, row, key=lambda r: r.seq)
        del self.rows[:-ROWS_KEPT]
        if trace is not None:
            bisect.insort(self.models, (row, trace), key=lambda model: model[0].seq)
        oldest = self.rows[0].seq
        while self.models and self.models[0][0].seq < oldest:  # gone from the rows kept
            del self.models[0]
        return after

    def step(
        self, cassette: str, run: str, row: TriageRow, trace: Trace | None
    ) -> list[Occurrence]:
        """What the run shows once ``row`` comes after all its others: as ``run_failures``
        over the run finds it (ignored tool errors, then loops, then dropped context), for
        the new row alone."""
        if trace is None:
            if row.kind == TOOL_ERROR and row.signature is not None:
                self.tool_errors.append(row)  # ignored or not: the next model call tells
            return []
        found: list[Occurrence] = []
        for error in self.tool_errors:
            signature = error.signature or ""
            if not trace.mentions(_status(signature)):
                ignored = IGNORED_TOOL_ERROR + signature[len(TOOL_ERROR) :]
                found.append(
                    Occurrence(
                        IGNORED_TOOL_ERROR, ignored, cassette, run, error.seq, error.started_at,
                        of_run=True,
                    )
                )  # fmt: skip
        self.tool_errors.clear()
        for name, key in trace.tool_calls():
            current = self.running.get(name)
            if current is None or current[0] != key:
                current = self.running[name] = (key, [])
            current[1].append((row.seq, row.started_at))
            if len(current[1]) == LOOP_MIN:
                found.append(_loop(cassette, run, name, current[1]))
        before = self.last_call.get(trace.api)
        self.last_call[trace.api] = (row, trace)
        if before is not None and trace.carried() > 1:
            gone = _gone(before[1], trace)
            if gone is not None:
                found.append(_context(cassette, run, trace.api, gone, before[0], row))
        return found

    def reread(self, cassette: str, run: str) -> list[Occurrence]:
        """The run read whole again (a row came before others), and where reading stopped
        set as if its rows had come in order."""
        self.running.clear()
        self.last_call.clear()
        self.tool_errors.clear()
        models = dict((model.seq, trace) for model, trace in self.models)
        for row in self.rows:
            self.step(cassette, run, row, models.get(row.seq))
        return list(run_failures(cassette, run, self.rows, self.models))


RUNS_KEPT = 2_000
"""Runs a RunReaders keeps at once, the least recently seen dropped first."""
ROWS_KEPT = 200
"""Model calls and failing exchanges of one run it keeps (the others cannot show a run's
failure): a loop or a dropped message is seen within these. With RUNS_KEPT, this bounds
what a recording proxy holds to some tens of megabytes at worst."""


class RunReaders:
    """The failures only a run shows, found as its exchanges come (recorded, imported, or
    signed again), so that triage reads only failing exchanges and never every model call.

    A row that comes after all of its run's others (how a proxy records) is read on its
    own, from where the reading of the run stopped (``_Run.step``): reading the run's rows
    again at every row cost a recording proxy's writer more than any other stage, and grew
    with the run. A row that comes before others has the run's rows read again
    (run_failures). Either way, what was not found before is stored with the exchange that
    showed it, and what is found is what reading the whole run at once finds, as long as its
    exchanges come to one reader (one proxy; a run recorded through several replicas is read
    per replica) and the run is among the RUNS_KEPT most recent."""

    def __init__(self) -> None:
        self._runs: OrderedDict[tuple[str, str | None], _Run] = OrderedDict()

    def sign(self, exchange: NewExchange) -> NewExchange:
        """``exchange`` with its signals and its run's new failures (the record path)."""
        signed = with_signals(exchange)
        assert signed.signals is not None
        signals = self.signals(
            exchange.cassette,
            exchange.slot.seq,
            exchange.context.get("run-id"),
            exchange.started_at,
            signed.signals,
        )
        return dataclasses.replace(signed, signals=signals)

    def signals(
        self, cassette: str, seq: int, run_id: str | None, at: float, signals: Signals
    ) -> Signals:
        if signals.trace is None and signals.kind is None:
            return signals  # neither a model call nor a failure: nothing a run reads
        key = (cassette, run_id)
        held = self._runs.get(key)
        if held is None:
            held = self._runs[key] = _Run()
            if len(self._runs) > RUNS_KEPT:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        row = TriageRow(
            cassette, seq, run_id, at, signals.kind, signals.signature, signals.trace, None
        )
        trace = trace_of(row.trace)
        run = run_name(cassette, run_id)
        if held.add(row, trace):
            shown = held.step(cassette, run, row, trace)
        else:
            shown = held.reread(cassette, run)
        found = held.found
        new = [o for o in shown if o.of_run and (o.kind, o.signature, o.seq) not in found]
        found.update((o.kind, o.signature, o.seq) for o in new)
        lines = "\n".join(f"{o.kind}\t{o.seq}\t{o.at!r}\t{o.signature}" for o in new)
        return dataclasses.replace(signals, run_failures=lines or None)


def signed_imports(items: Iterable[Imported]) -> Iterator[Imported]:
    """Imported exchanges with their signals and their runs' failures, in file order."""
    readers = RunReaders()
    for item in items:
        yield dataclasses.replace(item, exchange=readers.sign(item.exchange))


def groups(rows: Iterable[TriageRow], kind: str | None = None) -> list[Group]:
    """The failure groups of the failing rows (ReadStore.triage_rows), largest (most failures)
    first; only those of ``kind`` when given."""
    by_signature: dict[str, list[Occurrence]] = {}
    for found in stored_occurrences(rows):
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


def group_document(
    group: Group, *, detail: bool = False, number: int | None = None
) -> dict[str, Any]:
    """One group as ``triage --json`` and ``/triage.json`` give it, with its ``number`` (what
    ``recheck`` takes) when known; with ``detail``, every occurrence too (the case file's
    page)."""
    example = group.example
    document: dict[str, Any] = {
        "number": number,
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


def triage_document(
    found: Sequence[Group], *, detail: bool = False, numbered: dict[str, int] | None = None
) -> dict[str, Any]:
    """``found`` as one document; ``numbered`` (``numbers``) gives each group its number."""
    known = numbered or {}
    return {
        "groups": [group_document(g, detail=detail, number=known.get(g.signature)) for g in found]
    }


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
    store: ReadStore,
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


def find_group(store: ReadStore, group: str) -> Group:
    """The group that ``group`` names (``GROUP`` in the CLI): its number as ``triage`` lists
    it, its signature, or a prefix of exactly one signature. Signatures run to 200
    characters, which nobody types; ValueError (one line) when it names none or several."""
    found = find_groups(store)
    wanted = group.strip()
    if wanted.isdigit():
        number = int(wanted)
        if 1 <= number <= len(found):
            return found[number - 1]
        raise ValueError(
            f"no failure group number {number}: `freezeframe triage` lists "
            f"{len(found)} group{'' if len(found) == 1 else 's'}"
        )
    for candidate in found:
        if candidate.signature == group:
            return candidate
    prefixed = [g for g in found if g.signature.startswith(wanted)] if wanted else []
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        numbers = ", ".join(str(found.index(g) + 1) for g in prefixed[:5])
        more = "" if len(prefixed) <= 5 else f" and {len(prefixed) - 5} more"
        raise ValueError(
            f"{group!r} begins {len(prefixed)} signatures (groups {numbers}{more}): "
            "give more of it, or the group's number"
        )
    near = [g for g in found if wanted.lower() in g.signature.lower()] if wanted else []
    hint = f"; did you mean group {found.index(near[0]) + 1}, {near[0].signature!r}?"
    raise ValueError(
        f"no failure group has the signature {group!r}{hint if len(near) == 1 else ''}"
    )


def numbers(store: ReadStore) -> dict[str, int]:
    """Each signature's group number as ``triage`` lists it unfiltered (largest group first):
    the number a filtered listing shows too, so that ``recheck N`` finds the group shown."""
    return {group.signature: n for n, group in enumerate(find_groups(store), start=1)}


def last_recheck(result: RecheckResult) -> dict[str, Any]:
    """A group's last recheck as the triage page shows it: when, one line, and the whole
    ``recheck --json`` document."""
    document = json.loads(result.document)
    runs = document.get("runs", [])
    if document.get("live"):
        low, high = document["interval"]
        verdicts: dict[str, int] = {}
        for run in runs:
            verdicts[run["verdict"]] = verdicts.get(run["verdict"], 0) + 1
        said = ", ".join(f"{n} {verdict}" for verdict, n in verdicts.items())
        line = (
            f"live: {document['passed']} of {document['tries']} tries passed, "
            f"flip rate {document['flip_rate']:.2f} (95% {low:.2f}-{high:.2f}); {said}"
        )
        if document.get("stopped"):
            line += f"; stopped early ({len(document.get('untried', []))} runs not tried)"
    else:
        passed = sum(bool(run["passed"]) for run in runs)
        line = f"replay: {passed} of {len(runs)} runs passed"
    return {"at": result.at, "summary": line, "document": document}


def stale_cassettes(store: ReadStore) -> dict[str, int]:
    """The cassettes holding an exchange whose signals are missing or older than
    SIGNATURE_VERSION, with how many exchanges each holds: what ``rebuild`` reads."""
    names = dict.fromkeys(cassette for cassette, _ in store.unsigned(SIGNATURE_VERSION))
    return {name: len(store.exchanges(name)) for name in names}


def rebuild(store: WriteStore, advance: Callable[[int], None] = lambda _: None) -> int:
    """Work out again the signals of every exchange of each cassette that holds one whose
    signals are missing or older than SIGNATURE_VERSION (a store recorded before triage, or
    by older rules): all its exchanges, in order, since its runs' failures are read from
    them together. ``advance`` is told of each exchange done. Returns how many.

    Newer rules may name a failure anew (``gpt-{n}o`` became ``gpt-4o``): a group's last
    recheck, kept by its signature, follows it when every failure that bore the old
    signature bears one same new one."""
    stale = list(stale_cassettes(store))
    before = _signatures(store, stale)
    signed = sum(sign_cassette(store, cassette, advance) for cassette in stale)
    _follow_rechecks(store, before, _signatures(store, stale))
    return signed


def _signatures(store: ReadStore, cassettes: list[str]) -> dict[tuple[str, int], str]:
    """The signature of each failing exchange of ``cassettes``, by (cassette, seq)."""
    if not cassettes:
        return {}
    rows = store.triage_rows(cassettes=cassettes)
    return {(row.cassette, row.seq): row.signature for row in rows if row.signature}


def _follow_rechecks(
    store: WriteStore, before: dict[tuple[str, int], str], after: dict[tuple[str, int], str]
) -> None:
    """Keep each last recheck under the signature its failures bear now, when they all bear
    one and it has none of its own."""
    renamed: dict[str, set[str | None]] = {}
    for where, old in before.items():
        renamed.setdefault(old, set()).add(after.get(where))
    kept = store.rechecks()
    for old, new in renamed.items():
        result = kept.get(old)
        name = next(iter(new)) if len(new) == 1 else None
        if result is not None and name is not None and name != old and name not in kept:
            store.keep_recheck(dataclasses.replace(result, signature=name))


def sign_cassette(
    store: WriteStore, cassette: str, advance: Callable[[int], None] = lambda _: None
) -> int:
    """Work out the signals of every exchange of ``cassette``, in order; how many. ``edit``
    calls it on the fork it made, whose edited answer the old answer's signals would
    misname: left to ``triage --rebuild``, every what-if made triage ask for one."""
    readers = RunReaders()
    found: dict[int, Signals] = {}
    try:
        for summary in store.exchanges(cassette):
            exchange = store.exchange(cassette, summary.seq)
            run_id = exchange.recorded.context.get("run-id")
            found[exchange.seq] = readers.signals(
                cassette, exchange.seq, run_id, exchange.recorded.started_at, signals_of(exchange)
            )
            advance(1)
    except (CassetteNotFound, ExchangeNotFound):
        return 0  # removed meanwhile: nothing to sign
    store.store_signals(cassette, found)
    return len(found)


def pending_count(store: ReadStore) -> int:
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
