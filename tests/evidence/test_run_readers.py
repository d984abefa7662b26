"""A run's failures found as its exchanges come (RunReaders) are those reading the whole run
at once finds (run_failures): loops, dropped context and ignored tool errors, whatever the
run, read one row at a time as a proxy records, or with rows coming late."""

from __future__ import annotations

import random

import pytest

from freezeframe.evidence.signatures import SIGNATURE_VERSION, TOOL_ERROR, Trace
from freezeframe.evidence.triage import ROWS_KEPT, RunReaders, run_failures, run_name
from freezeframe.storage import Signals, TriageRow

TOOLS = ("lookup_order", "refund", "search")
APIS = ("openai.chat", "anthropic.messages")


def random_run(rng: random.Random, length: int) -> list[Signals]:
    """Model calls (with tool calls that repeat, system prompts and first messages that
    change now and then) and tool errors, in an order an agent could make them."""
    run: list[Signals] = []
    system, first = "You help.", "Where is order 7?"
    for _ in range(length):
        if rng.random() < 0.2:
            status = rng.choice((404, 500, 503))
            signature = f"{TOOL_ERROR} GET tools.local/orders/{{n}} {status}: failed"
            run.append(Signals(SIGNATURE_VERSION, TOOL_ERROR, signature, None))
            continue
        if rng.random() < 0.1:
            system = rng.choice(("You help.", "You are terse.", ""))
        if rng.random() < 0.05:
            first = rng.choice(("Where is order 7?", "Refund order 9."))
        calls = tuple(
            (rng.choice(TOOLS), rng.choice(("a1", "b2"))) for _ in range(rng.choice((0, 1, 1, 2)))
        )
        trace = Trace.of(
            api=rng.choice(APIS),
            system=system,
            first=first,
            messages=rng.randint(1, 30),
            codes=tuple(rng.sample((404, 500, 503), rng.randint(0, 1))),
            error=rng.random() < 0.2,
            calls=calls,
        )
        run.append(Signals(SIGNATURE_VERSION, None, None, trace.encode()))
    return run


def whole(run: list[Signals]) -> set[tuple[str, str, int]]:
    rows = [
        TriageRow("c", seq, "r", float(seq), s.kind, s.signature, s.trace, None)
        for seq, s in enumerate(run)
    ]
    return {
        (o.kind, o.signature, o.seq)
        for o in run_failures("c", run_name("c", "r"), rows)
        if o.of_run
    }


def read(run: list[Signals], order: list[int]) -> set[tuple[str, str, int]]:
    readers = RunReaders()
    found: set[tuple[str, str, int]] = set()
    for seq in order:
        signed = readers.signals("c", seq, "r", float(seq), run[seq])
        for line in (signed.run_failures or "").splitlines():
            kind, at, _, signature = line.split("\t", 3)
            found.add((kind, signature, int(at)))
    return found


@pytest.mark.parametrize("seed", range(40))
def test_read_as_recorded_it_finds_what_the_whole_run_shows(seed: int) -> None:
    rng = random.Random(seed)
    run = random_run(rng, rng.randint(1, ROWS_KEPT - 1))
    assert read(run, list(range(len(run)))) == whole(run)


@pytest.mark.parametrize("seed", range(20))
def test_rows_that_come_late_miss_nothing_the_whole_run_shows(seed: int) -> None:
    rng = random.Random(1000 + seed)
    run = random_run(rng, rng.randint(2, 80))
    order = list(range(len(run)))
    for _ in range(len(run) // 4):  # a few answers that came back out of order
        i = rng.randrange(len(order) - 1)
        order[i], order[i + 1] = order[i + 1], order[i]
    assert whole(run) <= read(run, order)


def test_the_generated_runs_show_every_kind_of_run_failure() -> None:
    """So that the tests above compare something: the runs they read hold loops, dropped
    context and ignored tool errors."""
    kinds = set()
    for seed in range(40):
        rng = random.Random(seed)
        kinds |= {kind for kind, _, _ in whole(random_run(rng, rng.randint(1, ROWS_KEPT - 1)))}
    assert kinds == {"loop", "context", "ignored_tool_error"}
