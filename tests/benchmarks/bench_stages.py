"""CPU per stage of recording one ~20 KB chat exchange, in this process, stage by stage.

    .venv/bin/python tests/benchmarks/bench_stages.py                 # 300 exchanges a stage
    .venv/bin/python tests/benchmarks/bench_stages.py --rounds 1000 --json out.json

Each stage runs the library function the record path runs (addons.record, storage.inflight,
canonicalize, evidence, storage.sql's writer), on the same request (a 40-turn chat
completion, about 20 KB) and answer (about 1 KB of JSON), and reports where it runs when
recording (the event loop, or the store's writer) and the process CPU time
(``time.process_time``: every thread of this process, so the store's writer thread is
counted) per exchange. CPU time, not wall time, so a busy machine inflates it little; the
stages are run interleaved, round after round, so what load there is falls on all of them.

The stages are what the issue (#30) names: tee (the answer's body fed chunk by chunk to its
owner), hand-off (the pickling the writer process's channel does), decode and redaction (a
request body's owner, storage.inflight.Body), parse (one ``json.loads`` of the request: the
event loop parses it once, for the key, and the store's writer for the facts, the signals
and search), key (canonicalize, its own parse included), facts, signature (triage's
signals), the run's failures (RunReaders, the signals included), search values, compression
(zstd, both bodies), and commit + index (a real SQLite store's writer thread, batched as it
batches). Deltas are not a stage of their own: a conversation's body is compressed against
its base inside commit. ``sent digest`` is replay's lookup by bytes (storage.sent), for
comparison with ``key``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize
from freezeframe.evidence.facts import exchange_facts
from freezeframe.evidence.recording import new_exchange
from freezeframe.evidence.requests import WireRequest
from freezeframe.evidence.signatures import with_signals
from freezeframe.evidence.triage import RunReaders
from freezeframe.storage import NewExchange, Outcome, RecordedResponse, Slot, open_store
from freezeframe.storage.blobs import compress
from freezeframe.storage.inflight import Body
from freezeframe.storage.records import Chunk
from freezeframe.storage.redaction import Redactor
from freezeframe.storage.search import searchable
from freezeframe.storage.sent import sent_digest

JSON = (b"content-type", b"application/json")
LOOP, WRITER, REPLAY = "loop", "writer", "replay"
"""Where a stage runs when recording: on the proxy's event loop, or in the store's writer
(a process of its own by default); replay's lookup is for comparison."""


def chat_request(n: int) -> bytes:
    """A 40-turn chat completion, about 20 KB; ``n`` makes each one unique."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of {n}: " + "w" * 480}
        for i in range(40)
    ]
    return json.dumps({"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2}).encode()


ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "an answer " * 80},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5000, "completion_tokens": 160, "total_tokens": 5160},
    }
).encode()
REQUEST_HEADERS = (
    (b"host", b"api.openai.com"),
    JSON,
    (b"authorization", b"Bearer sk-proj-bench0123456789abcdefghijklmnop"),
    (b"user-agent", b"OpenAI/Python 1.100.0"),
)
ANSWER_HEADERS = (JSON, (b"x-request-id", b"req_1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="exchanges per stage")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = parser.parse_args()

    redactor = Redactor(b"k" * 32)
    secrets = redactor.secret_values(REQUEST_HEADERS, "/v1/chat/completions")
    config = KeyConfig()
    bodies = [chat_request(n) for n in range(args.rounds)]
    print(f"request {len(bodies[0]):,} bytes, answer {len(ANSWER):,} bytes, {args.rounds} rounds")

    def view(body: bytes) -> RequestView:
        return RequestView(
            method="POST",
            scheme="https",
            host="api.openai.com",
            port=443,
            path="/v1/chat/completions",
            query=(),
            headers=(("content-type", "application/json"),),
            body=body,
            content_type="application/json",
        )

    def response(body: bytes) -> RecordedResponse:
        return RecordedResponse(
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            headers=ANSWER_HEADERS,
            body=body,
            chunks=(Chunk(0, 0.1),),
            first_byte_at=0.1,
        )

    def exchange(i: int) -> NewExchange:
        body = bodies[i]
        canonical = canonicalize(view(body), config)
        request = WireRequest(
            "POST",
            "https",
            "api.openai.com",
            443,
            "/v1/chat/completions",
            redactor.headers(REQUEST_HEADERS, secrets),
            body,
            "HTTP/1.1",
        )
        return new_exchange(
            "bench",
            request,
            canonical,
            view(body),
            slot=Slot(i, 0),
            started_at=time.time(),
            duration=0.2,
            response=response(ANSWER),
            outcome=Outcome.COMPLETE,
            error=None,
            context={"run-id": "bench"},
        )

    def tee(i: int) -> None:
        answer = Body(redactor, secrets, ANSWER_HEADERS, what="answer")
        for start in range(0, len(ANSWER), 256):
            answer.feed(ANSWER[start : start + 256])
        answer.end()

    def decode_and_redact(i: int) -> None:
        body = Body(redactor, secrets, REQUEST_HEADERS, hold=None)
        body.feed(bodies[i])
        body.end()

    prepared = [exchange(i) for i in range(args.rounds)]
    canonicals = [canonicalize(view(body), config) for body in bodies]
    runs = RunReaders()
    stages: dict[str, tuple[str, Callable[[int], object]]] = {
        "tee (answer, 256-byte chunks)": (LOOP, tee),
        "decode + redaction (request)": (LOOP, decode_and_redact),
        "redaction alone (request body)": (LOOP, lambda i: redactor.body(bodies[i], secrets)),
        "parse (one json.loads of the request)": ("both", lambda i: json.loads(bodies[i])),
        "key (canonicalize, its parse included)": (
            LOOP,
            lambda i: canonicalize(view(bodies[i]), config),
        ),
        "sent digest (replay's lookup by bytes)": (REPLAY, lambda i: sent_digest(
            "POST",
            "https",
            "api.openai.com",
            443,
            "/v1/chat/completions",
            REQUEST_HEADERS,
            bodies[i],
        )),
        "facts": (WRITER, lambda i: exchange_facts(
            view(bodies[i]), response(ANSWER), canonicals[i].profile, None
        )),
        "signature (triage's signals)": (WRITER, lambda i: with_signals(prepared[i])),
        "run's failures (RunReaders.sign: signals, then the run)": (
            WRITER,
            lambda i: runs.sign(prepared[i]),
        ),
        "search values": (WRITER, lambda i: searchable(prepared[i])),
        "compression (zstd, both bodies)": (
            WRITER,
            lambda i: (compress(bodies[i]), compress(ANSWER)),
        ),
        "hand-off (pickled for the writer process)": (LOOP, lambda i: pickle.dumps(
            prepared[i], protocol=pickle.HIGHEST_PROTOCOL
        )),
    }  # fmt: skip
    spent = dict.fromkeys(stages, 0.0)
    for i in range(args.rounds):
        for name, (_, stage) in stages.items():
            started = time.process_time()
            stage(i)
            spent[name] += time.process_time() - started
    commit = "commit + index (SQLite, writer thread)"
    spent[commit] = _commit(prepared)
    where = {name: place for name, (place, _) in stages.items()} | {commit: WRITER}

    rows = {name: spent[name] / args.rounds * 1e6 for name in spent}
    width = max(len(name) for name in rows)
    for name, micros in rows.items():
        print(f"{name:<{width}}  {where[name]:<7}  {micros:9.1f} µs")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


def _commit(exchanges: list[NewExchange]) -> float:
    """Process CPU to submit ``exchanges`` to a fresh SQLite store and have its writer
    thread commit and index them all (a flush, then the index written)."""
    with tempfile.TemporaryDirectory() as where:
        store = open_store(f"sqlite:///{where}/bench.db")
        try:
            slots = [store.reserve("bench", e.key) for e in exchanges]
            ready = [
                NewExchange(**{**_fields(e), "slot": slot})
                for e, slot in zip(exchanges, slots, strict=True)
            ]
            started = time.process_time()
            for e in ready:
                store.submit(e)
            store.flush(120)
            store.search("turn")  # the writer indexes what it committed before answering
            return time.process_time() - started
        finally:
            store.close()


def _fields(exchange: NewExchange) -> dict[str, object]:
    return {name: getattr(exchange, name) for name in exchange.__dataclass_fields__}


if __name__ == "__main__":
    sys.exit(main())
