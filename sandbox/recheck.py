"""``freezeframe recheck``: a fix checked against every run of a failure group.

Each run of the group is replayed to the command, one at a time, through a proxy of its
own in replay with ``exec``'s isolation (sandbox.command.run_command): the command sees what
that run saw, and nothing else is reachable. A run passes when the command exits 0 and
replay missed nothing; else it fails, with the exit status and the first miss. The group
collapses when every run passes.

A run named ``cassette@run_id`` shares its cassette with other runs, and replay serves a
cassette's recordings of one request in recorded order, so the run's own exchanges are
first copied into a cassette of their own (``<cassette>.recheck-<digest>``, removed after),
in their order, each request's occurrences counted again from the first.

With ``--live`` (recheck_live), a fix that changes the prompt can be checked too: the run's
model calls (what providers.apis recognises) go upstream for real, through ``exec``'s live
routes (addons.routing), while every other call is still answered from the run's recording.
A live model is not deterministic, so each run is tried N times and gets a verdict from how
many tries passed, with a 95 % Wilson interval on that share (one pass proves little). A try
that asks for a call the run never made (a miss: replay has no answer for it) is the finding
itself: the run ``diverged``. Each try is recorded into a cassette of its own, kept, so a
flaky try can be opened and diffed against a passing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import glob
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blake3 import blake3

from freezeframe.addons.state import Event, Mode
from freezeframe.canonicalize import Route
from freezeframe.evidence.triage import Group
from freezeframe.providers.apis import api_of
from freezeframe.providers.prices import cost_of, tokens_of
from freezeframe.proxy.settings import Settings
from freezeframe.sandbox.aside import output_to, output_to_stderr
from freezeframe.sandbox.command import Confinement, run_command
from freezeframe.storage import (
    CassetteNotFound,
    Exchange,
    ExchangeFilter,
    ExchangeNotFound,
    Imported,
    Miss,
    ReadStore,
    RecheckResult,
    Slot,
    WriteStore,
)

RUN_VARIABLE = "FREEZEFRAME_RECHECK_RUN"
"""Set for the command: the run it replays, ``cassette`` or ``cassette@run_id``."""
RUN_ID_VARIABLE = "FREEZEFRAME_RECHECK_RUN_ID"
"""Set for the command: the run's id, or "" for a run that is a whole cassette."""


@dataclass(frozen=True, slots=True)
class RunCheck:
    """How one run of the group went under the command."""

    run: str
    passed: bool
    status: int
    """The command's exit status."""
    first_miss: Miss | None
    """The first request replay could not answer from the run; None when none missed."""


@dataclass(frozen=True, slots=True)
class Recheck:
    signature: str
    runs: tuple[RunCheck, ...]

    @property
    def collapsed(self) -> bool:
        """Every run of the group passes: the fix holds for all of them."""
        return all(run.passed for run in self.runs)


async def recheck(
    store: WriteStore,
    group: Group,
    command: Sequence[str],
    settings: Settings,
    confinement: Confinement | None = None,
    said: Callable[[RunCheck], None] = lambda _: None,
) -> Recheck:
    """Run ``command`` once per run of ``group``, in replay against that run (``settings``
    give the store, ports and pace; mode and cassette are set here); ``said`` hears of
    each run as it ends."""
    checks = []
    for run in group.runs:
        with _cassette_of(store, run) as cassette, _told(run):
            began = time.time()
            replaying = dataclasses.replace(settings, mode=Mode.REPLAY, cassette=cassette)
            status = await run_command(
                command, settings=replaying, confinement=confinement or Confinement()
            )
            missed = [m for m in store.misses(cassette) if m.at >= began]
            first = min(missed, key=lambda m: m.at) if missed else None
        check = RunCheck(run, status == 0 and first is None, status, first)
        said(check)
        checks.append(check)
    return Recheck(group.signature, tuple(checks))


Z_95 = 1.959963984540054
"""The normal quantile of a two-sided 95 % interval."""
DEFAULT_TRIES = 5

FIXED, FLAKY, STILL_FAILING, DIVERGED = "fixed", "flaky", "still_failing", "diverged"
VERDICTS = (FIXED, FLAKY, STILL_FAILING, DIVERGED)


def wilson(passed: int, tries: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of the pass rate ``passed / tries``: unlike the normal
    approximation it stays inside [0, 1] and is honest at 0 or all passes, where a handful
    of tries says least (5 of 5 is [0.57, 1.00], not [1, 1]). (0, 1) when nothing was tried."""
    if tries <= 0:
        return (0.0, 1.0)
    share = passed / tries
    denominator = 1 + z * z / tries
    centre = (share + z * z / (2 * tries)) / denominator
    half = z * math.sqrt(share * (1 - share) / tries + z * z / (4 * tries * tries)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True, slots=True)
class Tally:
    """Tries and passes, and what they say: the flip rate is the share of tries in which the
    recorded failure flipped to a pass, with its 95 % Wilson interval."""

    tries: int
    passed: int

    @property
    def flip_rate(self) -> float:
        return self.passed / self.tries if self.tries else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passed, self.tries)

    def document(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "tries": self.tries,
            "passed": self.passed,
            "flip_rate": round(self.flip_rate, 4),
            "interval": [round(low, 4), round(high, 4)],
        }


@dataclass(frozen=True, slots=True)
class Live:
    """What ``--live`` asked for: tries per run, and the limits that stop the spending."""

    tries: int = DEFAULT_TRIES
    max_live_calls: int | None = None
    budget: float | None = None
    """US dollars, checked against the estimate before anything goes live."""
    model_url: tuple[str, str, int] | None = None
    """Another model's scheme, host and port, instead of the upstream the run recorded."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """What going live will cost, from the group's recordings: each run's model calls, once
    per try, priced from their recorded token counts (providers.prices)."""

    live_calls: int
    cost: float
    """US dollars for the calls that have a price."""
    unpriced: int
    """Calls with no recorded token counts or no price for their model: not in ``cost``."""
    models: tuple[str, ...]

    def line(self) -> str:
        cost = f"about ${self.cost:.4f}"
        if self.unpriced:
            cost += f" plus {self.unpriced} calls with no known price"
        models = ", ".join(self.models) or "no model named"
        return f"going live: {self.live_calls} model calls ({models}), {cost}"

    def refusal(self, live: Live) -> str | None:
        """Why the limits forbid going live at all, or None."""
        if live.max_live_calls is not None and self.live_calls > live.max_live_calls:
            return (
                f"--max-live-calls {live.max_live_calls}: the recheck would make about "
                f"{self.live_calls} live model calls; lower --tries or raise the limit"
            )
        if live.budget is not None:
            if self.unpriced:
                return (
                    f"--budget {live.budget:g}: {self.unpriced} of the {self.live_calls} model "
                    "calls have no known price, so the cost cannot be held to it"
                )
            if self.cost > live.budget:
                return (
                    f"--budget {live.budget:g}: the recheck would cost about "
                    f"${self.cost:.4f}; lower --tries or raise the budget"
                )
        return None

    def document(self) -> dict[str, Any]:
        return {
            "live_calls": self.live_calls,
            "cost_usd": round(self.cost, 6),
            "unpriced_calls": self.unpriced,
            "models": list(self.models),
        }


def estimate(store: ReadStore, group: Group, tries: int) -> Estimate:
    """The cost of ``tries`` tries of each run of ``group`` with a live model, read from the
    recorded model calls (a fixed agent may make more or fewer: this is the run as it was)."""
    calls, cost, unpriced = 0, 0.0, 0
    models: set[str] = set()
    for run in group.runs:
        recorded = _recorded_cost(_run_exchanges(store, run))
        calls += recorded.live_calls * tries
        cost += recorded.cost * tries
        unpriced += recorded.unpriced * tries
        models.update(recorded.models)
    return Estimate(calls, cost, unpriced, tuple(sorted(models)))


def _recorded_cost(exchanges: Sequence[Exchange]) -> Estimate:
    """The model calls among ``exchanges`` and what they cost, once each."""
    calls, cost, unpriced = 0, 0.0, 0
    models: set[str] = set()
    for exchange in exchanges:
        if api_of(exchange.recorded.method, exchange.recorded.path) is None:
            continue
        calls += 1
        model = exchange.recorded.facts.get("model")
        model = model if isinstance(model, str) else None
        if model:
            models.add(model)
        one = _cost(exchange)
        if one is None:
            unpriced += 1
        else:
            cost += one
    return Estimate(calls, cost, unpriced, tuple(sorted(models)))


def _cost(exchange: Exchange) -> float | None:
    """What one model call cost, from its model and its answer's token counts, or None."""
    model = exchange.recorded.facts.get("model")
    usage = exchange.recorded.facts.get("usage")
    tokens = tokens_of(usage if isinstance(usage, dict) else None)
    return None if tokens is None else cost_of(model if isinstance(model, str) else None, tokens)


@dataclass(slots=True)
class Spending:
    """What the live tries have spent so far, held to ``--max-live-calls`` and ``--budget``.

    A try is not cut short (its verdict would mean nothing), so the limits are kept by not
    starting a try that would pass one, judged by the most one try has spent so far or, before
    the first, by the run's recording: a fixed agent that makes more calls than the recorded
    one is stopped before it overspends, not after."""

    live: Live
    calls: int = 0
    cost: float = 0.0
    most_calls: int = 0
    most_cost: float = 0.0

    def spent(self, calls: int, cost: float) -> None:
        self.calls += calls
        self.cost += cost
        self.most_calls = max(self.most_calls, calls)
        self.most_cost = max(self.most_cost, cost)

    def stop(self, recorded: Estimate) -> str | None:
        """Why the next try of a run with this ``recorded`` cost must not start, or None."""
        limit = self.live.max_live_calls
        calls = max(self.most_calls, recorded.live_calls)
        if limit is not None and self.calls + calls > limit:
            return (
                f"--max-live-calls {limit}: {self.calls} live model calls made, and the next "
                f"try would make about {calls} more"
            )
        budget = self.live.budget
        cost = max(self.most_cost, recorded.cost)
        if budget is not None and self.cost + cost > budget:
            return (
                f"--budget {budget:g}: about ${self.cost:.4f} spent, and the next try would "
                f"cost about ${cost:.4f} more"
            )
        return None


@dataclass(frozen=True, slots=True)
class Try:
    """One try of a run with the live model."""

    number: int
    passed: bool
    status: int
    cassette: str
    """Where the try was recorded (live answers, and the replayed ones as copies)."""
    live_calls: int
    unanswered: tuple[str, ...]
    """``METHOD URL`` of each call the run never made (replay missed it)."""

    def document(self) -> dict[str, Any]:
        return {
            "try": self.number,
            "passed": self.passed,
            "status": self.status,
            "cassette": self.cassette,
            "live_calls": self.live_calls,
            "unanswered": list(self.unanswered),
        }


@dataclass(frozen=True, slots=True)
class LiveRunCheck:
    run: str
    tries: tuple[Try, ...]

    @property
    def tally(self) -> Tally:
        return Tally(len(self.tries), sum(t.passed for t in self.tries))

    @property
    def diverged(self) -> tuple[str, ...]:
        """Every call a try asked for that the run never made, once each, in order."""
        return tuple(dict.fromkeys(call for t in self.tries for call in t.unanswered))

    @property
    def verdict(self) -> str:
        """``diverged`` first: replay cannot answer such a call, so its tries say nothing
        of the fix, and the call is the finding; else by how many tries passed."""
        if self.diverged:
            return DIVERGED
        tally = self.tally
        if tally.tries and tally.passed == tally.tries:
            return FIXED
        return FLAKY if tally.passed else STILL_FAILING


@dataclass(frozen=True, slots=True)
class LiveRecheck:
    signature: str
    estimate: Estimate
    runs: tuple[LiveRunCheck, ...]
    stopped: str | None = None
    """Why tries were left undone (``--max-live-calls`` or ``--budget`` reached), or None."""
    untried: tuple[str, ...] = ()
    """Runs of the group not tried at all, the limits having stopped the recheck first."""

    @property
    def tally(self) -> Tally:
        tallies = [run.tally for run in self.runs]
        return Tally(sum(t.tries for t in tallies), sum(t.passed for t in tallies))

    @property
    def collapsed(self) -> bool:
        """Every run of the group is fixed, with every try asked for: a recheck a limit
        stopped has not shown what it was asked to show."""
        fixed = all(run.verdict == FIXED for run in self.runs)
        return bool(self.runs) and fixed and self.stopped is None


async def recheck_live(
    store: WriteStore,
    group: Group,
    command: Sequence[str],
    settings: Settings,
    live: Live,
    confinement: Confinement | None = None,
    said: Callable[[LiveRunCheck], None] = lambda _: None,
) -> LiveRecheck:
    """Run ``command`` ``live.tries`` times per run of ``group``, in replay against that run
    with its model calls sent upstream (see the module's docstring); ``said`` hears of each
    run as its tries end. Starts no try that would pass ``live.max_live_calls`` or
    ``live.budget`` (Spending), and then stops: the report names the runs left untried."""
    planned = estimate(store, group, live.tries)
    checks: list[LiveRunCheck] = []
    spending = Spending(live)
    stopped: str | None = None
    for run in group.runs:
        exchanges = _run_exchanges(store, run)
        routes, recorded = model_routes(exchanges), _recorded_cost(exchanges)
        tries: list[Try] = []
        with _cassette_of(store, run) as cassette, _told(run):
            for number in range(1, live.tries + 1):
                stopped = spending.stop(recorded)
                if stopped is not None:
                    break
                into = try_cassette(run, number)
                if store.has_cassette(into):
                    store.remove(into)  # a try of an earlier recheck: this one replaces it
                journal: list[Event] = []
                trying = dataclasses.replace(
                    settings,
                    mode=Mode.REPLAY,
                    cassette=cassette,
                    live=routes,
                    record_into=into,
                    live_upstream=live.model_url,
                )
                status = await run_command(
                    command,
                    settings=trying,
                    confinement=confinement or Confinement(),
                    journal=journal,
                )
                unanswered = tuple(f"{e.method} {e.url}" for e in journal if e.kind == "miss")
                went_live = [e for e in journal if e.kind == "recorded"]
                spending.spent(len(went_live), _spent(store, went_live, recorded))
                passed = status == 0 and not unanswered
                tries.append(Try(number, passed, status, into, len(went_live), unanswered))
        if tries:
            check = LiveRunCheck(run, tuple(tries))
            said(check)
            checks.append(check)
        if stopped is not None:
            break
    untried = tuple(run for run in group.runs[len(checks) :])
    return LiveRecheck(group.signature, planned, tuple(checks), stopped, untried)


def _spent(store: ReadStore, went_live: Sequence[Event], recorded: Estimate) -> float:
    """What a try's live calls cost, from their answers' token counts; a call whose answer
    carries none (or that the store did not keep) is counted at the recorded run's cost per
    call."""
    per_call = recorded.cost / recorded.live_calls if recorded.live_calls else 0.0
    total = 0.0
    for event in went_live:
        one = None
        if event.seq is not None:
            with contextlib.suppress(CassetteNotFound, ExchangeNotFound):
                one = _cost(store.exchange(event.cassette, event.seq))
        total += per_call if one is None else one
    return total


def model_routes(exchanges: Sequence[Exchange]) -> tuple[Route, ...]:
    """A live route for each model call the run made (host, port and path exactly), so
    that the same calls go upstream and nothing else does: a tool on the model's host
    stays frozen."""
    found = dict.fromkeys(
        (e.recorded.host.lower(), e.recorded.port, e.recorded.path.partition("?")[0])
        for e in exchanges
        if api_of(e.recorded.method, e.recorded.path) is not None
    )
    return tuple(
        Route(number=0, host=glob.escape(host), path=glob.escape(path), mode="record", port=port)
        for host, port, path in found
    )


def try_cassette(run: str, number: int) -> str:
    """Where try ``number`` of ``run`` is recorded: ``<cassette>.try-<digest>-<n>``, the
    digest naming the run within its cassette."""
    cassette, _, run_id = run.partition("@")
    digest = blake3(run.encode()).hexdigest()[:8]
    return f"{cassette}.try-{digest}-{number}" if run_id else f"{cassette}.try-{number}"


def keep(store: WriteStore, document: dict[str, Any]) -> None:
    """Keep a recheck's document (``recheck_document`` or ``live_document``) as its group's
    last, for the case file's triage page."""
    store.keep_recheck(RecheckResult(document["signature"], time.time(), json.dumps(document)))


def live_line(check: LiveRunCheck) -> str:
    """One run's verdict with the live model, for people."""
    tally = check.tally
    low, high = tally.interval
    line = (
        f"{check.verdict:<13} {check.run}: {tally.passed} of {tally.tries} tries passed, "
        f"flip rate {tally.flip_rate:.2f} (95% {low:.2f}-{high:.2f})"
    )
    if check.diverged:
        line += "; asked for a call the run never made: " + ", ".join(check.diverged)
    return line


def live_document(report: LiveRecheck) -> dict[str, Any]:
    """``recheck --live --json``: the group's tally and each run's, with every try."""
    return {
        "signature": report.signature,
        "live": True,
        "collapsed": report.collapsed,
        "estimate": report.estimate.document(),
        "stopped": report.stopped,
        "untried": list(report.untried),
        **report.tally.document(),
        "runs": [
            {
                "run": check.run,
                "verdict": check.verdict,
                **check.tally.document(),
                "diverged": list(check.diverged),
                "tries_done": [t.document() for t in check.tries],
            }
            for check in report.runs
        ],
    }


@contextlib.contextmanager
def _told(run: str) -> Iterator[None]:
    """The command is told which run it replays (RUN_VARIABLE, RUN_ID_VARIABLE), so that a
    harness can give the agent that run's input."""
    saved = {name: os.environ.get(name) for name in (RUN_VARIABLE, RUN_ID_VARIABLE)}
    os.environ[RUN_VARIABLE] = run
    os.environ[RUN_ID_VARIABLE] = run.partition("@")[2]
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _Extracted:
    def __init__(self, store: WriteStore, name: str) -> None:
        self.store, self.name = store, name

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: object) -> None:
        if self.name and self.store.has_cassette(self.name):
            self.store.remove(self.name)


class _Whole:
    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: object) -> None:
        return None


def _cassette_of(store: WriteStore, run: str) -> _Extracted | _Whole:
    """The cassette to replay ``run`` from: its own, or a copy of its exchanges alone."""
    cassette, _, run_id = run.partition("@")
    if not run_id:
        return _Whole(cassette)
    name = f"{cassette}.recheck-{blake3(run_id.encode()).hexdigest()[:12]}"
    if store.has_cassette(name):
        store.remove(name)  # left by a recheck that was killed
    store.import_cassette(name, _copies(store, name, _run_exchanges(store, run)))
    return _Extracted(store, name)


def _run_exchanges(store: ReadStore, run: str) -> list[Exchange]:
    """The exchanges of ``run`` (a cassette, or ``cassette@run_id``), in order."""
    cassette, _, run_id = run.partition("@")
    where = ExchangeFilter(run_id=run_id) if run_id else None
    return [store.exchange(cassette, s.seq) for s in store.exchanges(cassette, where)]


def _copies(store: ReadStore, name: str, exchanges: Sequence[Exchange]) -> Iterator[Imported]:
    counts: dict[str, int] = {}
    for seq, e in enumerate(exchanges):
        recorded = e.recorded
        occurrence = counts.get(recorded.key, 0)
        counts[recorded.key] = occurrence + 1
        refs = [
            ref
            for ref in (recorded.request_body_ref, recorded.response and recorded.response.body_ref)
            if ref
        ]
        yield Imported(
            dataclasses.replace(
                recorded,
                cassette=name,
                slot=Slot(seq, occurrence),
                stripped=recorded.stripped or {},
                origin=None,
            ),
            streams=tuple((ref, functools.partial(store.read_blob, ref)) for ref in refs),
        )


def check_line(check: RunCheck) -> str:
    """One run's verdict, for people."""
    if check.passed:
        return f"passed  {check.run}"
    why = f"exit {check.status}"
    if check.first_miss is not None:
        miss = check.first_miss
        why += f"; first miss: {miss.method} {miss.url}"
    return f"FAILED  {check.run}: {why}"


def recheck_document(report: Recheck) -> dict[str, Any]:
    """``recheck --json``: the group's verdict and each run's."""
    return {
        "signature": report.signature,
        "collapsed": report.collapsed,
        "runs": [
            {
                "run": check.run,
                "passed": check.passed,
                "status": check.status,
                "first_miss": None
                if check.first_miss is None
                else {
                    "method": check.first_miss.method,
                    "url": check.first_miss.url,
                    "key": check.first_miss.key,
                    "message": check.first_miss.message,
                },
            }
            for check in report.runs
        ],
    }


def recheck_group(
    store: WriteStore,
    group: Group,
    command: Sequence[str],
    settings: Settings,
    confinement: Confinement,
    live: Live | None,
    *,
    quiet: bool,
    aside: Path | None,
    say: Callable[[str], None],
) -> Recheck | LiveRecheck:
    """``freezeframe recheck``: ``recheck``, or ``recheck_live`` with ``live``, saying a line
    per run through ``say`` unless ``quiet`` (``--json``: stdout is the document, and the
    commands run write to stderr); with ``aside``, the commands' output and the proxies'
    logs go to that file. The report is kept in the store for the case file."""
    with output_to_stderr(quiet), output_to(aside, say) as said:
        if live is None:
            report: Recheck | LiveRecheck = asyncio.run(
                recheck(
                    store,
                    group,
                    command,
                    settings,
                    confinement,
                    lambda check: None if quiet else said(check_line(check)),
                )
            )
        else:
            report = asyncio.run(
                recheck_live(
                    store,
                    group,
                    command,
                    settings,
                    live,
                    confinement,
                    lambda check: None if quiet else said(live_line(check)),
                )
            )
    keep(store, report_document(report))
    return report


def report_document(report: Recheck | LiveRecheck) -> dict[str, Any]:
    """``recheck --json``, live or not."""
    if isinstance(report, LiveRecheck):
        return live_document(report)
    return recheck_document(report)


def summary_line(report: Recheck | LiveRecheck) -> str:
    """The last line of ``recheck``: how many runs (tries, when live) passed, and whether
    the group collapsed."""
    if isinstance(report, Recheck):
        verdict = "collapsed: every run passes" if report.collapsed else "still failing"
        passed = sum(check.passed for check in report.runs)
        return f"{passed} of {len(report.runs)} runs pass; the group is {verdict}"
    tally = report.tally
    low, high = tally.interval
    return (
        f"{tally.passed} of {tally.tries} tries passed over {len(report.runs)} runs, "
        f"flip rate {tally.flip_rate:.2f} (95% {low:.2f}-{high:.2f}); the group is "
        + ("fixed" if report.collapsed else "not fixed")
    )
