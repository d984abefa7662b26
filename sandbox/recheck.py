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
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from blake3 import blake3

from freezeframe.evidence.triage import Group
from freezeframe.proxy.settings import Mode, Settings
from freezeframe.sandbox.command import Confinement, run_command
from freezeframe.storage import (
    Exchange,
    ExchangeFilter,
    Imported,
    Miss,
    NewExchange,
    Slot,
    Store,
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
    store: Store,
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
    def __init__(self, store: Store, name: str) -> None:
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


def _cassette_of(store: Store, run: str) -> _Extracted | _Whole:
    """The cassette to replay ``run`` from: its own, or a copy of its exchanges alone."""
    cassette, _, run_id = run.partition("@")
    if not run_id:
        return _Whole(cassette)
    name = f"{cassette}.recheck-{blake3(run_id.encode()).hexdigest()[:12]}"
    if store.has_cassette(name):
        store.remove(name)  # left by a recheck that was killed
    summaries = store.exchanges(cassette, ExchangeFilter(run_id=run_id))
    exchanges = [store.exchange(cassette, s.seq) for s in summaries]
    store.import_cassette(name, _copies(store, name, exchanges))
    return _Extracted(store, name)


def _copies(store: Store, name: str, exchanges: Sequence[Exchange]) -> Iterator[Imported]:
    counts: dict[str, int] = {}
    for seq, e in enumerate(exchanges):
        occurrence = counts.get(e.key, 0)
        counts[e.key] = occurrence + 1
        refs = [ref for ref in (e.request_body_ref, e.response and e.response.body_ref) if ref]
        yield Imported(
            NewExchange(
                cassette=name,
                key=e.key,
                key_scheme=e.key_scheme,
                canonical=e.canonical,
                method=e.method,
                scheme=e.scheme,
                host=e.host,
                port=e.port,
                path=e.path,
                http_version=e.http_version,
                request_headers=e.request_headers,
                request_body=e.request_body,
                started_at=e.started_at,
                duration=e.duration,
                response=e.response,
                outcome=e.outcome,
                error=e.error,
                context=e.context,
                slot=Slot(seq, occurrence),
                request_body_ref=e.request_body_ref,
                stripped=dict(e.stripped or {}),
                facts=e.facts,
                messages=e.messages,
            ),
            streams=tuple((ref, lambda ref=ref: store.read_blob(ref)) for ref in refs),
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
