"""How fast the case file opens a long run and a huge answer, in-process over a real store.

    .venv/bin/python tests/benchmarks/bench_casefile.py [--exchanges 10000] [--body-mb 200]

Two targets from the case file's issue:

* a run of ``--exchanges`` exchanges opens its waterfall (``/cassettes/NAME``, the first page)
  in under a second; measured against a 100-exchange run, so the ratio says how the page
  grows with the run (the waterfall is paged: only the listing query grows);
* an exchange whose answer is ``--body-mb`` MB opens its page without reading the body
  whole: the page's time and the Python memory it allocates (tracemalloc peak) against an
  exchange with a 20 MB body, whose ratio stays near 1 when only a preview is read.

The store is a temporary SQLite file, written the way the proxy writes (blob writer for a
large body). A script, not a test: it prints the numbers and whether the targets are met.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.canonicalize import RequestView, canonicalize
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.keys import key_config
from freezeframe.proxy.settings import Settings
from freezeframe.storage import Chunk, NewExchange, Outcome, RecordedResponse, Store, open_store

ANSWER = json.dumps({"choices": [{"message": {"content": "ok"}}], "usage": {"total_tokens": 9}})


def write_run(store: Store, cassette: str, count: int) -> None:
    for n in range(count):
        body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": n}]})
        submit(store, cassette, n, body.encode(), ANSWER.encode(), None)
    store.flush()


def write_big(store: Store, cassette: str, megabytes: int) -> None:
    writer = store.blob_writer()
    piece = bytes(range(256)) * 4096  # 1 MiB that does not compress to nothing
    for n in range(megabytes):
        writer.write(piece[n % 256 :] + piece[: n % 256])
    submit(store, cassette, 0, b"{}", b"", writer.finish())
    store.flush()


def submit(store: Store, cassette: str, n: int, request: bytes, answer: bytes, ref: object) -> None:
    view = RequestView(
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        query=(),
        headers=(),
        body=request,
        content_type="application/json",
    )
    canonical = canonicalize(view, key_config())
    store.submit(
        NewExchange(
            cassette=cassette,
            key=canonical.key,
            key_scheme=1,
            canonical=canonical.form,
            method="POST",
            scheme="https",
            host="api.openai.com",
            port=443,
            path="/v1/chat/completions",
            http_version="HTTP/1.1",
            request_headers=((b"content-type", b"application/json"),),
            request_body=request,
            started_at=1_790_000_000.0 + n,
            duration=0.3,
            response=RecordedResponse(
                status=200,
                reason="OK",
                http_version="HTTP/1.1",
                headers=((b"content-type", b"application/json"),),
                body=answer,
                chunks=(Chunk(0, 0.1),),
                first_byte_at=0.1,
                body_ref=ref,  # type: ignore[arg-type]
            ),
            outcome=Outcome.COMPLETE,
            error=None,
            context={"run-id": f"run-{n // 50}"},
            slot=store.reserve(cassette, canonical.key),
        )
    )


def timed(call: Callable[[], object], repeat: int = 5) -> float:
    """The median of ``repeat`` runs, after one warm-up, in seconds."""
    call()
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def peak(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=10_000)
    parser.add_argument("--body-mb", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        data_dir = Path(directory)
        with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
            write_run(store, "short", 100)
            write_run(store, "long", options.exchanges)
            write_big(store, "body-20", 20)
            write_big(store, "body-big", options.body_mb)
            app = create_app(store, RuntimeState(Mode.REPLAY, "long"), Settings(data_dir=data_dir))
            with TestClient(app, base_url="http://127.0.0.1:8081") as client:

                def get(path: str) -> Callable[[], object]:
                    def fetch() -> object:
                        answer = client.get(path)
                        assert answer.status_code == 200, (path, answer.text[:300])
                        return answer

                    return fetch

                short = timed(get("/cassettes/short"))
                long = timed(get("/cassettes/long"))
                long_json = timed(get("/cassettes/long.json"), repeat=3)
                small_body = timed(get("/cassettes/body-20/0"))
                big_body = timed(get("/cassettes/body-big/0"))
                small_peak = peak(get("/cassettes/body-20/0"))
                big_peak = peak(get("/cassettes/body-big/0"))
    n = options.exchanges
    print(f"run view, 100 exchanges:        {short * 1000:7.1f} ms")
    print(f"run view, {n} exchanges:    {long * 1000:7.1f} ms  ({long / short:.1f}x)")
    print(f"  its JSON twin (every row):    {long_json * 1000:7.1f} ms")
    small = f"{small_body * 1000:7.1f} ms, peak {small_peak >> 10} KiB"
    print(f"exchange, 20 MB body:           {small}")
    print(
        f"exchange, {options.body_mb} MB body:          {big_body * 1000:7.1f} ms, "
        f"peak {big_peak >> 10} KiB  ({big_body / small_body:.2f}x time, "
        f"{big_peak / small_peak:.2f}x memory)"
    )
    print(
        f"targets: run view under 1 s: {'met' if long < 1.0 else 'NOT met'}; "
        f"body not read whole: {'met' if big_peak < 8 * 1024 * 1024 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
