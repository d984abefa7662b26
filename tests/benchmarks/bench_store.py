"""The store alone: the writer thread's CPU per exchange, and what a replay hit costs.

    .venv/bin/python tests/benchmarks/bench_store.py                  # SQLite in a temp dir
    .venv/bin/python tests/benchmarks/bench_store.py --url postgresql+psycopg://postgres@127.0.0.1:5432/DB
    .venv/bin/python tests/benchmarks/bench_store.py --exchanges 4000 --repeat 5

The exchanges look like the proxy benchmark's (tests/benchmarks/bench_proxy.py): a ~20 KB
chat-completion request sent again and again (the same body and canonical form, so the
same key, occurrence after occurrence), each answered by a different ~1 KB response.

* ``writer CPU/exchange``: CPU the process spent beyond the submitting thread's own,
  divided by the exchanges, for submit() of all of them then flush(): in effect the writer
  thread's cost, which in the proxy competes with the event loop for the GIL.
* ``submit``: the caller's side of submit() (on the event loop in the proxy).
* ``lookup hit``: wall time of lookup() for each recording once, in order, from a fresh
  store (so every response body is read for the first time, as in a replay run), then
  the same again (bodies now cached).
* ``lookup miss``: a key the cassette does not have (auto mode asks this for every new
  request before forwarding it).

A script, not a test: it prints numbers and asserts none. Each figure is the best of
``--repeat`` runs, each in a fresh database.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH, so another checkout can be measured

from freezeframe.storage import (  # noqa: E402
    Chunk,
    NewExchange,
    Outcome,
    RecordedResponse,
    Store,
    open_store,
)

KEY = "a" * 64


def chat_body(target_size: int = 20_000) -> bytes:
    filler = (
        "The agent inspected the repository, ran the failing test, read the traceback and "
        "proposed a patch to the parser that keeps byte offsets stable across retries. "
    )
    messages = [{"role": "system", "content": "You are a careful coding agent. Answer tersely."}]
    turn = 0
    while len(json.dumps(messages)) < target_size - 400:
        role = "user" if turn % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"[turn {turn}] " + filler * 3})
        turn += 1
    body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2, "user": "bench"}
    return json.dumps(body, separators=(",", ":")).encode()


BODY = chat_body()
CANONICAL = json.dumps(
    {
        "method": "POST",
        "url": "https://api.openai.com/v1/chat/completions",
        "headers": [["content-type", "application/json"]],
        "body": json.loads(BODY),
    },
    indent=1,
).encode()


def response_body(n: int) -> bytes:
    return json.dumps(
        {
            "id": f"chatcmpl-{uuid.UUID(int=n)}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"Done, step {n}. " * 40},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5000, "completion_tokens": 120, "total_tokens": 5120},
        }
    ).encode()


REQUEST_HEADERS = (
    (b"host", b"api.openai.com"),
    (b"accept", b"application/json"),
    (b"content-type", b"application/json"),
    (b"user-agent", b"OpenAI/Python 1.50.0"),
    (b"authorization", b"[redacted:0123456789abcdef]"),
    (b"content-length", str(len(BODY)).encode()),
)


def exchange(store: Store, n: int) -> NewExchange:
    body = response_body(n)
    return NewExchange(
        cassette="bench",
        key=KEY,
        key_scheme=1,
        canonical=CANONICAL,
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        http_version="HTTP/1.1",
        request_headers=REQUEST_HEADERS,
        request_body=BODY,
        started_at=1_700_000_000.0 + n,
        duration=0.012,
        response=RecordedResponse(
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            headers=(
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"date", b"Tue, 14 Nov 2023 22:13:20 GMT"),
                (b"x-request-id", str(uuid.UUID(int=n)).encode()),
                (b"openai-processing-ms", b"512"),
            ),
            body=body,
            chunks=(Chunk(0, 0.011),),
            first_byte_at=0.011,
        ),
        outcome=Outcome.COMPLETE,
        error=None,
        context={"run-id": "bench-run", "session-id": "s-1"},
        slot=store.reserve("bench", KEY),
    )


def timed_each(calls: int, call: Callable[[int], object]) -> float:
    """Mean seconds per call."""
    started = time.perf_counter()
    for n in range(calls):
        call(n)
    return (time.perf_counter() - started) / calls


def one_run(url: str, count: int) -> dict[str, float]:
    results: dict[str, float] = {}
    with open_store(url) as store:
        pending = [exchange(store, n) for n in range(count)]
        cpu, mine = time.process_time(), time.thread_time()
        wall = time.perf_counter()
        for item in pending:
            store.submit(item)
        submitted = time.thread_time() - mine
        store.flush(600)
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu - (time.thread_time() - mine)
        results["writer CPU/exchange us"] = cpu / count * 1e6
        results["submit us"] = submitted / count * 1e6
        results["write wall/exchange us"] = wall / count * 1e6
        # As the proxy's sequential requests arrive: one exchange per batch.
        single = [exchange(store, count + n) for n in range(min(count, 500))]
        cpu, mine = time.process_time(), time.thread_time()
        for item in single:
            store.submit(item)
            store.flush(600)
        cpu = time.process_time() - cpu - (time.thread_time() - mine)
        results["writer CPU/exchange 1-by-1 us"] = cpu / len(single) * 1e6
    with open_store(url) as store:
        results["lookup hit, cold us"] = (
            timed_each(count, lambda n: store.lookup("bench", KEY, n)) * 1e6
        )
        results["lookup hit, cached us"] = (
            timed_each(count, lambda n: store.lookup("bench", KEY, n)) * 1e6
        )
        results["lookup miss us"] = (
            timed_each(min(count, 500), lambda n: store.lookup("bench", "b" * 64, n)) * 1e6
        )
        results["exchange() us"] = (
            timed_each(min(count, 500), lambda n: store.exchange("bench", n)) * 1e6
        )
        started = time.perf_counter()
        found = store.candidates("bench", "POST", "api.openai.com", "/v1/chat/completions")
        results["candidates(200) ms"] = (time.perf_counter() - started) * 1e3
        assert len(found) == min(count, 200) and found[0].canonical == CANONICAL
        started = time.perf_counter()
        report = store.verify("bench")
        results["verify ms"] = (time.perf_counter() - started) * 1e3
        assert report.ok, report.detail
        hit = store.lookup("bench", KEY, count - 1)
        assert (
            hit is not None
            and hit.recorded.canonical == CANONICAL
            and hit.recorded.request_body == BODY
        )
    return results


def fresh_postgres(url: str) -> tuple[str, Callable[[], None]]:
    import psycopg

    server, _, _ = url.rpartition("/")
    admin = server.replace("postgresql+psycopg", "postgresql") + "/postgres"
    name = f"ff_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return f"{server}/{name}", drop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (a database is made per run)")
    parser.add_argument("--exchanges", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            if args.url:
                url, drop = fresh_postgres(args.url)
            else:
                url, drop = f"sqlite:///{tmp}/freezeframe.db", lambda: None
            try:
                results = one_run(url, args.exchanges)
            finally:
                drop()
        for name, value in results.items():
            best[name] = min(best.get(name, value), value)
    backend = "postgresql" if args.url else "sqlite"
    print(f"store benchmark: {backend}, {args.exchanges} exchanges, best of {args.repeat}")
    print(f"  storage package: {Path(sys.modules['storage'].__file__ or '').parent}")
    print(f"  request body {len(BODY)} B, canonical form {len(CANONICAL)} B")
    for name, value in best.items():
        print(f"  {name:28} {value:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
