"""Conversations on disk: bytes stored per turn as an agent's conversation grows.

    .venv/bin/python tests/benchmarks/bench_conversations.py
    .venv/bin/python tests/benchmarks/bench_conversations.py --turns 10 60 200 --json out.json
    .venv/bin/python tests/benchmarks/bench_conversations.py --turns 60 --turn-kb 20
    .venv/bin/python tests/benchmarks/bench_conversations.py --url postgresql+psycopg://postgres@127.0.0.1:5432/DB

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

A script, not a test: it asserts nothing but that every body reads back as it was sent.
"""

from __future__ import annotations

import argparse
import contextlib
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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
