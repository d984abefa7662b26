"""Triage over a big store: how long ``freezeframe triage`` takes on 200,000 exchanges, and what
working out one exchange's signature costs the record path.

    .venv/bin/python tests/benchmarks/bench_triage.py                    # 200,000 exchanges
    .venv/bin/python tests/benchmarks/bench_triage.py --size 1000000
    .venv/bin/python tests/benchmarks/bench_triage.py --keep /var/tmp/triage

A SQLite store is filled through the store's own API (``submit``) with ``--size`` exchanges
in runs of 20 (100 runs a cassette, each run with its id): a model call and a tool call in
turn, each with the signals the record path gives it (evidence.signatures.with_signals,
worked out once per shape and reused, so that filling does not take an hour, and its run's
failures found as the record path finds them, evidence.triage.RunReaders); one run in 25
fails: a 429, a tool's 404, a loop of the same lookup, or a tool's 500 the agent ignored.
Then:

* ``sign``: RunReaders.sign on a recorded-looking model call with tools and one tool call,
  per exchange (what recording an exchange now costs on top);
* ``triage (library)``: evidence.triage.find_groups on a store just opened, best of three;
* ``triage (command)``: ``freezeframe triage --json`` as a user runs it, process start
  included, best of three.

A script, not a test: it asserts only that every planted failure's group is found whole.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from support.exchanges import plausible_exchange, plausible_response  # noqa: E402

from freezeframe.evidence.signatures import with_signals  # noqa: E402
from freezeframe.evidence.triage import RunReaders, find_groups  # noqa: E402
from freezeframe.storage import NewExchange, Slot, Store, open_store  # noqa: E402

RUN = 20
RUNS_PER_CASSETTE = 100
FAILING_EVERY = 25
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}},
                "required": ["order_id"],
            },
        },
    }
]
JSON = ((b"content-type", b"application/json"),)


def model_call(
    turn: int, answer: dict[str, object], status: int = 200, result: str = '{"ok": 1}'
) -> NewExchange:
    messages = [
        {"role": "system", "content": "You are the order desk."},
        {"role": "user", "content": "Where is order 8812?"},
    ]
    for n in range(turn):
        call = {"id": f"call_{n}", "type": "function"}
        call["function"] = {"name": "lookup_order", "arguments": '{"order_id": 8812}'}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": result})
    body = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
    return plausible_exchange(
        Slot(0, 0),
        path="/v1/chat/completions",
        request_headers=JSON,
        request_body=json.dumps(body).encode(),
        response=plausible_response(status=status, headers=JSON, body=json.dumps(answer).encode()),
    )


def completion(calls: bool, order: int = 8812) -> dict[str, object]:
    message: dict[str, object] = {"role": "assistant", "content": None if calls else "Shipped."}
    if calls:
        function = {"name": "lookup_order", "arguments": json.dumps({"order_id": order})}
        message["tool_calls"] = [{"id": "call_x", "type": "function", "function": function}]
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 20},
        "model": "gpt-4o-2024-08-06",
    }


def tool_call(status: int) -> NewExchange:
    body = b'{"ok": 1}' if status < 400 else b'{"error": "order 8812 not found"}'
    return plausible_exchange(
        Slot(0, 0),
        method="GET",
        host="orders.internal",
        path="/orders/8812",
        request_body=b"",
        response=plausible_response(status=status, headers=JSON, body=body),
    )


def shapes() -> dict[str, list[NewExchange]]:
    """One run of each kind as signed exchanges: healthy, rate-limited, a tool's 404 the
    agent carried back, a loop, and a tool's 500 the agent ignored."""
    limited = {"error": {"message": "Rate limit reached", "type": "tokens", "code": "rate"}}
    ask, done = completion(True), completion(False)
    healthy = [  # a lookup of another order each time: work, not a loop
        e for order in range(7) for e in (model_call(0, completion(True, order)), tool_call(200))
    ]
    runs = {
        "healthy": healthy + [model_call(1, done)],
        "rate_limit": [model_call(0, limited, 429)],
        "tool_404": [model_call(0, ask), tool_call(404), model_call(1, done, result="error 404")],
        "loop": [model_call(n, ask) for n in range(4)] + [model_call(4, done)],
        "ignored": [model_call(0, ask), tool_call(500), model_call(1, done)],
    }
    return {name: [with_signals(e) for e in run] for name, run in runs.items()}


def fill(store: Store, size: int) -> dict[str, set[str]]:
    signed = shapes()
    healthy = signed["healthy"]
    planted = [name for name in signed if name != "healthy"]
    expected: dict[str, set[str]] = {name: set() for name in planted}
    written = 0
    run_number = 0
    readers = RunReaders()
    began = time.perf_counter()
    while written < size:
        cassette = f"prod-{run_number // RUNS_PER_CASSETTE:05d}"
        run_id = f"run-{run_number:07d}"
        kind = planted[run_number % len(planted)] if run_number % FAILING_EVERY == 0 else None
        template = signed[kind] if kind else []
        count = min(RUN, size - written)
        for n in range(count):
            shape = template[n] if n < len(template) else healthy[n % len(healthy)]
            key = f"{run_number:08x}{n:04x}"
            slot = store.reserve(cassette, key)
            at = 1_790_000_000.0 + written
            assert shape.signals is not None
            # As the record path does: the run's failures found as its exchanges come.
            signals = readers.signals(cassette, slot.seq, run_id, at, shape.signals)
            store.submit(
                dataclasses.replace(
                    shape,
                    cassette=cassette,
                    key=key,
                    slot=slot,
                    started_at=at,
                    context={"run-id": run_id},
                    signals=signals,
                )
            )
            written += 1
        if kind:
            expected[kind].add(f"{cassette}@{run_id}")
        run_number += 1
        if run_number % 1000 == 0:
            print(f"  {written:,} exchanges, {time.perf_counter() - began:.0f} s", flush=True)
    store.flush(600)
    return expected


def best_of(times: int, what: object) -> float:
    taken = []
    for _ in range(times):
        began = time.perf_counter()
        what()  # type: ignore[operator]
        taken.append(time.perf_counter() - began)
    return min(taken)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    directory = args.keep or Path(tempfile.mkdtemp(prefix="bench-triage-"))
    directory.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{directory}/freezeframe.db"

    sample = [model_call(3, completion(True)), tool_call(404)]
    per = best_of(3, lambda: [RunReaders().sign(e) for e in sample * 50]) / 100
    print(f"sign: {per * 1e6:.0f} µs per exchange (a model call with 8 messages, a tool call)")

    fresh = not (directory / "freezeframe.db").exists()
    with open_store(url) as store:
        if fresh:
            print(f"filling {args.size:,} exchanges into {directory}")
            expected = fill(store, args.size)
            (directory / "expected.json").write_text(
                json.dumps({k: sorted(v) for k, v in expected.items()})
            )
    expected = {k: set(v) for k, v in json.loads((directory / "expected.json").read_text()).items()}

    with open_store(url) as store:
        groups = find_groups(store)
        library = best_of(3, lambda: find_groups(store))
    runs = {g.kind: set(g.runs) for g in groups}
    assert runs["provider_error"] == expected["rate_limit"]
    assert runs["tool_error"] == expected["tool_404"]
    assert runs["loop"] == expected["loop"]
    assert runs["ignored_tool_error"] == expected["ignored"]
    failing = sum(len(v) for v in expected.values())
    print(f"{len(groups)} groups, {failing:,} failing runs")
    print(f"triage (library): {library:.3f} s over {args.size:,} exchanges")

    command = [sys.executable, "-P", "-m", "freezeframe", "triage", "--json", "--store", url]
    cli = best_of(3, lambda: subprocess.run(command, check=True, capture_output=True))
    print(f"triage (command): {cli:.3f} s, process start included")


if __name__ == "__main__":
    main()
