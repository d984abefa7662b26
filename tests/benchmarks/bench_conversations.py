"""Conversations on disk: bytes stored per turn as an agent's conversation grows.

    .venv/bin/python tests/benchmarks/bench_conversations.py
    .venv/bin/python tests/benchmarks/bench_conversations.py --turns 10 60 200 --json out.json
    .venv/bin/python tests/benchmarks/bench_conversations.py --turns 60 --turn-kb 20
    .venv/bin/python tests/benchmarks/bench_conversations.py --url postgresql+psycopg://postgres@127.0.0.1:5432/DB
    .venv/bin/python tests/benchmarks/bench_conversations.py --cpu --turns 60 --turn-kb 20

Each run records one conversation (tests/support/agent_traffic.py: a system prompt, six
tool schemas, a user message and an answer per turn, every word drawn afresh, so nothing
repeats that an agent would not repeat) through the store's own API, with the canonical
form the proxy would key it by (canonicalize) and a chat-completion answer, then reports:

* ``bodies``: the request bodies' raw bytes, which grow with the square of the turns;
* ``distinct``: what the conversation says, each byte once (the last request, which holds
  every earlier message, plus the answers);
* ``whole``: what storing every body, form and answer compressed on its own would take
  (freezeframe before schema 6);
* ``stored``: the ``stored_size`` of every blob, and ``per turn`` that divided by turns;
  ``db file``: the SQLite file after a checkpoint (no ``--url``);
* ``db added``: what the SQLite file grew by (search index, rows and all), against the same
  store empty;
* ``read last``: reading the last exchange (the longest chain of bases) from a store just
  opened, so no body is cached, median of ``--reads`` runs; ``depth``: the longest chain.

With ``--cpu`` it reports instead what the store's writer spends on each turn as the
conversation grows: the thread CPU (``time.thread_time``, in the writer thread) of finding
an exchange's search values (``values``), writing them into the index (``index add``),
choosing a body's base (``base``), compressing bodies (``compress``: on their own and
against a base) and the writer's whole commit and index (``commit``, ``index``), at the
turns given by ``--at`` (the least of ``--repeat`` conversations, so that another process's
load counts as little as it can). Each turn is flushed before the next is sent, as an
agent's turns are seconds apart. The stages are timed by wrapping the functions the writer
calls, so the numbers include a wrapper's few microseconds each.

A script, not a test: it asserts nothing but that every body reads back as it was sent.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from sqlalchemy import create_engine, text  # noqa: E402
from support.agent_traffic import Conversation  # noqa: E402

from freezeframe.canonicalize import RequestView, canonicalize  # noqa: E402
from freezeframe.storage import (  # noqa: E402
    Chunk,
    NewExchange,
    Outcome,
    RecordedResponse,
    Store,
    blobs,
    open_store,
)

PATH = "/v1/chat/completions"
WORD_BYTES = 7.8
"""Bytes a drawn word takes in a request, its space and JSON included (measured over
support.agent_traffic's prose), to turn ``--turn-kb`` into words."""


def answer_body(text: str, n: int) -> bytes:
    answer = {
        "id": f"chatcmpl-{n:08d}",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 100 + n, "completion_tokens": 120, "total_tokens": 220 + n},
    }
    return json.dumps(answer).encode()


def exchange(store: Store, cassette: str, n: int, body: bytes, answer: bytes) -> NewExchange:
    view = RequestView.of(
        "POST",
        "https",
        "api.openai.com",
        443,
        PATH,
        (("content-type", "application/json"),),
        body,
    )
    canonical = canonicalize(view)
    slot = store.reserve(cassette, canonical.key)
    return NewExchange(
        cassette=cassette,
        key=canonical.key,
        key_scheme=1,
        canonical=canonical.form,
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path=PATH,
        http_version="HTTP/1.1",
        request_headers=((b"content-type", b"application/json"),),
        request_body=body,
        started_at=1_700_000_000.0 + n,
        duration=1.5,
        response=RecordedResponse(
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            headers=((b"content-type", b"application/json"),),
            body=answer,
            chunks=(Chunk(0, 1.4),),
            first_byte_at=1.4,
        ),
        outcome=Outcome.COMPLETE,
        error=None,
        context={"run-id": "bench"},
        slot=slot,
    )


def one_conversation(
    url: str, turns: int, reads: int, db_file: Path | None, words: int = 0
) -> dict[str, float]:
    conversation = (
        Conversation(seed=turns, user_words=words // 3, answer_words=words - words // 3)
        if words
        else Conversation(seed=turns)
    )
    cassette = f"conversation-{turns}"
    before = store_bytes(url) if db_file is None else 0
    empty = 0
    if db_file is not None:
        with open_store(url) as store:
            store.has_cassette(cassette)
        empty = checkpointed_size(db_file)
    bodies: list[bytes] = []
    forms: list[bytes] = []
    answers: list[bytes] = []
    with open_store(url) as store:
        for n in range(turns):
            body = conversation.request()
            answer = answer_body(conversation.answer(), n)
            new = exchange(store, cassette, n, body, answer)
            store.submit(new)
            bodies.append(body)
            forms.append(new.canonical)
            answers.append(answer)
        store.flush(120)
    stored = store_bytes(url) - before
    depth = max_depth(url)
    added = checkpointed_size(db_file) - empty if db_file is not None else float("nan")
    timings = []
    for _ in range(reads):
        with open_store(url, create=False) as store:
            started = time.perf_counter()
            last = store.exchange(cassette, turns - 1)
            timings.append(time.perf_counter() - started)
        if last.recorded.request_body != bodies[-1]:
            raise SystemExit("the last request did not read back as it was sent")
    with open_store(url, create=False) as store:
        for n, body in enumerate(bodies):
            if store.exchange(cassette, n).recorded.request_body != body:
                raise SystemExit(f"request {n} did not read back as it was sent")
    whole = sum(len(blobs.compress(part)) for part in (*set(bodies), *set(forms), *answers))
    return {
        "turns": turns,
        "bodies": sum(map(len, bodies)),
        "distinct": len(bodies[-1]) + sum(map(len, answers)),
        "whole": whole,
        "stored": stored,
        "per_turn": stored / turns,
        "db_file": db_file.stat().st_size if db_file is not None else float("nan"),
        "db_added": added,
        "read_last_ms": statistics.median(timings) * 1000,
        "depth": depth,
    }


STAGES = {
    "values": (
        "freezeframe.storage.sql.search:SearchIndex.values",
        "freezeframe.storage.sql.writer:searchable",
    ),
    "index add": ("freezeframe.storage.sql.search:SearchIndex.add",),
    "base": ("freezeframe.storage.deltas:Lines.base_for",),
    "compress": (
        "freezeframe.storage.blobs:compress",
        "freezeframe.storage.blobs:compress_against",
    ),
    "commit": ("freezeframe.storage.sql.writer:Writer._commit",),
    "index": ("freezeframe.storage.sql.writer:Writer._index",),
}
"""Each stage's functions, the first of a stage's alternatives that exists (a checkout from
before ``SearchIndex.values`` finds an exchange's values with ``searchable``)."""


class Stopwatch:
    """Thread CPU spent in the wrapped functions, per stage, since the last ``lap``."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._undo: list[tuple[object, str, object]] = []
        for stage, places in STAGES.items():
            for place in places:
                owner, name = _owner(place)
                if owner is None:
                    continue
                self._wrap(owner, name, stage)
                if stage == "values":
                    break

    def _wrap(self, owner: object, name: str, stage: str) -> None:
        inner = getattr(owner, name)
        spent = self.spent
        depth = [0]

        def timed(*args: object, **kwargs: object) -> object:
            if depth[0]:
                return inner(*args, **kwargs)
            depth[0] += 1
            started = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[stage] += time.thread_time() - started
                depth[0] -= 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, inner))

    def lap(self) -> dict[str, float]:
        took = dict(self.spent)
        for stage in self.spent:
            self.spent[stage] = 0.0
        return took

    def close(self) -> None:
        for owner, name, inner in reversed(self._undo):
            setattr(owner, name, inner)


def _owner(place: str) -> tuple[object | None, str]:
    """The object holding ``module:attr`` or ``module:Class.attr``, and the attribute."""
    module_name, _, dotted = place.partition(":")
    owner: object = importlib.import_module(module_name)
    *path, name = dotted.split(".")
    for part in path:
        owner = getattr(owner, part)
    return (owner if hasattr(owner, name) else None), name


def cpu_per_turn(
    url: str, turns: int, words: int, at: list[int], repeat: int
) -> dict[int, dict[str, float]]:
    """The least thread CPU of each stage at each turn in ``at``, over ``repeat`` runs."""
    best: dict[int, dict[str, float]] = {}
    for run in range(repeat):
        conversation = (
            Conversation(seed=turns, user_words=words // 3, answer_words=words - words // 3)
            if words
            else Conversation(seed=turns)
        )
        cassette = f"cpu-{run}"
        watch = Stopwatch()
        try:
            with open_store(url) as store:
                for n in range(turns):
                    body = conversation.request()
                    answer = answer_body(conversation.answer(), n)
                    store.submit(exchange(store, cassette, n, body, answer))
                    store.flush(120)
                    took = watch.lap()
                    if n + 1 in at:
                        took["bytes"] = len(body)
                        kept = best.setdefault(n + 1, took)
                        for stage, seconds in took.items():
                            kept[stage] = min(kept[stage], seconds)
        finally:
            watch.close()
    return best


def checkpointed_size(db_file: Path) -> int:
    """The SQLite file's size with its write-ahead log folded in."""
    with contextlib.closing(sqlite3.connect(db_file)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db_file.stat().st_size


def store_bytes(url: str) -> int:
    return int(_scalar(url, "SELECT COALESCE(SUM(stored_size), 0) FROM blobs"))


def max_depth(url: str) -> int:
    return int(_scalar(url, "SELECT COALESCE(MAX(depth), 0) FROM blobs"))


def _scalar(url: str, sql: str) -> float:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return float(conn.execute(text(sql)).scalar() or 0)
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 60, 200])
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--url", help="a store URL (default: SQLite in a temporary directory)")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--turn-kb",
        type=float,
        default=0,
        help="new text per turn, user message and answer together (default: about 2.7 KB)",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="the writer's CPU per turn, stage by stage"
    )
    parser.add_argument("--at", type=int, nargs="+", default=[5, 20, 40, 60])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.cpu:
        return print_cpu(args)
    results = []
    header = (
        f"{'turns':>5} {'bodies':>10} {'distinct':>9} {'whole':>9} {'stored':>9} "
        f"{'per turn':>9} {'stored/distinct':>15} {'whole/stored':>12} {'db file':>9} "
        f"{'db added':>9} "
        f"{'read last':>10} {'depth':>5}"
    )
    print(header)
    for turns in args.turns:
        with tempfile.TemporaryDirectory() as tmp:
            db_file = None if args.url else Path(tmp) / "freezeframe.db"
            url = args.url or f"sqlite:///{db_file}"
            words = round(args.turn_kb * 1024 / WORD_BYTES) if args.turn_kb else 0
            result = one_conversation(url, turns, args.reads, db_file, words)
        results.append(result)
        print(
            f"{turns:>5} {result['bodies']:>10,.0f} {result['distinct']:>9,.0f} "
            f"{result['whole']:>9,.0f} {result['stored']:>9,.0f} {result['per_turn']:>9,.0f} "
            f"{result['stored'] / result['distinct']:>14.2f}x "
            f"{result['whole'] / result['stored']:>11.1f}x {result['db_file']:>9,.0f} "
            f"{result['db_added']:>9,.0f} "
            f"{result['read_last_ms']:>8.1f}ms {result['depth']:>5.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def print_cpu(args: argparse.Namespace) -> int:
    """The ``--cpu`` table: milliseconds of writer thread CPU per turn, stage by stage."""
    words = round(args.turn_kb * 1024 / WORD_BYTES) if args.turn_kb else 0
    turns = max(max(args.turns), max(args.at))
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'freezeframe.db'}"
        best = cpu_per_turn(url, turns, words, args.at, args.repeat)
    print(f"{'turn':>4} {'request':>10} " + " ".join(f"{stage:>9}" for stage in STAGES))
    for turn, took in sorted(best.items()):
        print(
            f"{turn:>4} {took['bytes']:>10,.0f} "
            + " ".join(f"{took[stage] * 1000:>7.2f}ms" for stage in STAGES)
        )
    if args.json:
        args.json.write_text(json.dumps(best, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
