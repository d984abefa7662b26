"""``exec --strict``: the command run in replay, then its tape read (evidence.tape).

The proxy ``exec`` starts keeps a journal of every request it answered; once the command has
ended, each cassette the run replayed from is compared with what was served from it. The
default cassette is always read, so a run that asked for nothing at all has left every
recording unused. Every replay ``exec`` runs keeps its tapes, strict or not, so ``show
CASSETTE --unused`` and the case file can say what the last replay left.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from freezeframe.addons.state import Event, Mode
from freezeframe.evidence.tape import Recorded, Tape, read_tape
from freezeframe.proxy.settings import Settings
from freezeframe.sandbox.clock import FakedClock
from freezeframe.sandbox.command import Confinement, run_command
from freezeframe.storage import CassetteNotFound, TapeRecord, open_store


async def run_with_tape(
    command: Sequence[str],
    settings: Settings,
    confinement: Confinement | None = None,
    clock: FakedClock | None = None,
) -> tuple[int, list[Tape], list[str]]:
    """The command's exit status, the tape of every cassette it replayed from (none
    outside ``replay``), and a line for each hit whose request drifted (drift_lines)."""
    journal: list[Event] = []
    status = await run_command(
        command,
        settings=settings,
        confinement=confinement or Confinement(),
        clock=clock,
        journal=journal,
    )
    if settings.mode is not Mode.REPLAY:
        return status, [], []
    return status, tapes(settings, journal), drift_lines(journal)


def drift_lines(journal: Sequence[Event]) -> list[str]:
    """A line for each hit whose request differed from its recording in a stripped part:
    the call, the recording that answered it, and each part with both values where known.
    The key said it was the same situation; the values say whether it still is."""
    return [
        f"{e.cassette}: drifted: {e.method} {e.url} replayed #{e.seq}: {e.drift_said()}"
        for e in journal
        if e.kind == "hit" and e.drift
    ]


def tapes(settings: Settings, journal: Sequence[Event]) -> list[Tape]:
    """The tape of the default cassette and of every other cassette ``journal`` hit, each
    kept in the store as its cassette's last (``show --unused``, the case file)."""
    names = dict.fromkeys([settings.cassette, *(e.cassette for e in journal if e.kind == "hit")])
    found = []
    with open_store(settings.store_url, create=False) as store:
        for name in names:
            try:
                summaries = store.exchanges(name)
            except CassetteNotFound:
                continue
            recorded = [Recorded(s.seq, s.method, s.url) for s in summaries]
            served = [e.seq for e in journal if e.kind == "hit" and e.cassette == name]
            tape = read_tape(name, recorded, [s for s in served if s is not None])
            store.keep_tape(TapeRecord(name, time.time(), json.dumps(tape.document())))
            found.append(tape)
    return found
