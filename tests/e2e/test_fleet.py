"""A fleet, measured: three ``freezeframe run`` replicas record one cassette into one
PostgreSQL store and one bucket under ``--durability strict``, and one is killed -9 mid-run.

Real clients (httpx, the OpenAI SDK) send through all three at once: unary tool calls with
large bodies, streamed chat completions, SSE streams, and one answer larger than the 8 MiB
spill (a multipart upload). Every request carries an id of its own. After the kill the test
checks what ``strict`` promises: every request a client got a whole answer for is stored,
once; ``verify`` passes; every body the store names is in the bucket under its digest; and a
surviving replica replays each acknowledged answer byte for byte without asking the upstream.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import openai
import psutil
import pytest
from support.database import run_sql
from support.netns import become_subreaper
from support.objectstore import SeaweedFS
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.storage import open_store
from freezeframe.storage.blobs import digest

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

CASSETTE = "fleet"
REPLICAS = 3
CLIENTS = 3
"""Clients per replica, each sending one request after another."""
ROUNDS = 4
"""Rounds each client of a surviving replica sends (a round: a tool call, a chat stream,
an SSE stream)."""
VICTIM_ROUNDS = 200
"""The victim's clients would send this many rounds: far more than they get to, so that the
kill always lands mid-run (the test checks that it did)."""
KILL_AFTER = 6
"""The victim is killed once it has acknowledged this many answers."""
PAD = 48 * 1024
"""Bytes of random text in each tool call (echoed back in its answer) and chat request."""
EVENTS = 20
LARGE = 9 * 1024 * 1024
"""More than the 8 MiB spill: uploaded to the bucket in parts."""
WAIT_S = 60.0
"""The most any wait on the fleet may take."""


@dataclass(frozen=True)
class Request:
    """One request, as sent and as sent again to the replay: ``rid`` is its own id."""

    rid: str
    kind: str  # "tool", "chat", "sse" or "large"
    pad: str = ""


def _url(base: str, request: Request) -> str:
    if request.kind == "sse":
        return f"{base}/sse/slow?events={EVENTS}&gap_ms=5&rid={request.rid}"
    if request.kind == "large":
        return f"{base}/bytes/random?size={LARGE}&seed=31&rid={request.rid}"
    return f"{base}/tool/counter"


def send(http: httpx.Client, chat: openai.OpenAI, base: str, request: Request) -> bytes:
    """The answer's bytes as the client received them, whole; raises when it was cut off."""
    if request.kind == "chat":
        with chat.chat.completions.with_streaming_response.create(
            model="gpt-test",
            messages=[{"role": "user", "content": f"{request.rid} {request.pad}"}],
            stream=True,
        ) as answer:
            body = b"".join(answer.iter_bytes())
        assert body.endswith(b"data: [DONE]\n\n"), body[-200:]
        return body
    if request.kind == "tool":
        answered = http.post(_url(base, request), json={"rid": request.rid, "pad": request.pad})
        answered.raise_for_status()
        assert answered.json()["echo"]["rid"] == request.rid
        return answered.content
    with http.stream("GET", _url(base, request)) as answered:
        answered.raise_for_status()
        body = b"".join(answered.iter_bytes())
    if request.kind == "sse":
        assert body.count(b"data: ") == EVENTS
    else:
        assert len(body) == LARGE
    return body


@contextmanager
def clients(proxy: ProxyProcess, base: str) -> Iterator[tuple[httpx.Client, openai.OpenAI]]:
    """An httpx client and an OpenAI SDK client through ``proxy``, never retrying: a request
    retried after the kill would hide what the first attempt got."""
    trusted = ssl.create_default_context(cafile=str(proxy.data_dir / "ca-bundle.pem"))
    with (
        httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=60) as http,
        httpx.Client(proxy=proxy.url, verify=trusted, trust_env=False, timeout=60) as sdk_http,
    ):
        chat = openai.OpenAI(
            base_url=f"{base}/v1", api_key="sk-fleet", http_client=sdk_http, max_retries=0
        )
        yield http, chat


class Tally:
    """What the clients were answered whole, by request id, and what they saw fail."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged: dict[str, tuple[Request, bytes]] = {}
        self.by_replica: dict[int, int] = {}
        self.failed: dict[int, list[str]] = {}
        self.finished: dict[int, int] = {}

    def answered(self, replica: int, request: Request, body: bytes) -> None:
        with self.lock:
            self.acknowledged[request.rid] = (request, body)
            self.by_replica[replica] = self.by_replica.get(replica, 0) + 1

    def count(self, replica: int) -> int:
        with self.lock:
            return self.by_replica.get(replica, 0)


def drive(
    proxy: ProxyProcess, base: str, replica: int, client: int, rounds: int, tally: Tally
) -> None:
    """One client of one replica: ``rounds`` rounds, or until an answer is cut off."""
    with clients(proxy, base) as (http, chat):
        for n in range(rounds):
            for kind in ("tool", "chat", "sse"):
                pad = secrets.token_hex(PAD // 2)
                request = Request(f"r{replica}c{client}n{n}{kind}", kind, pad)
                try:
                    tally.answered(replica, request, send(http, chat, base, request))
                except (httpx.HTTPError, openai.APIError, AssertionError) as exc:
                    with tally.lock:
                        tally.failed.setdefault(replica, []).append(f"{request.rid}: {exc!r}")
                    return
        with tally.lock:
            tally.finished[replica] = tally.finished.get(replica, 0) + 1


def large(proxy: ProxyProcess, base: str, replica: int, tally: Tally) -> None:
    """The answer over the spill, through a replica that survives."""
    with clients(proxy, base) as (http, chat):
        request = Request("large", "large")
        tally.answered(replica, request, send(http, chat, base, request))


def request_id(path: str, request_body: bytes) -> str:
    """The id a stored exchange's request carried, wherever its kind puts it."""
    query = parse_qs(urlsplit(path).query)
    if "rid" in query:
        return "large" if "/bytes/random" in path else query["rid"][0]
    body = json.loads(request_body)
    if "messages" in body:
        return str(body["messages"][0]["content"].split(" ", 1)[0])
    return str(body["rid"])


def wait_until(what: str, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.02)


def writer_children(proxy: ProxyProcess) -> list[psutil.Process]:
    assert proxy.process is not None
    return [
        child
        for child in psutil.Process(proxy.process.pid).children()
        if "freezeframe.storage.sql.writerchild" in " ".join(child.cmdline())
    ]


def killed_by(pid: int) -> int | None:
    """The signal that ended ``pid``, an orphan this process reaps (become_subreaper), once it
    has ended; None while it runs. 0: it exited on its own."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        return None
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def freezeframe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )


def test_a_fleet_with_one_replica_killed_under_strict_loses_nothing_it_acknowledged(
    start_proxy: Callable[..., ProxyProcess],
    upstream: Upstream,
    postgres_url: str,
    blobs_url: str,
    seaweedfs: SeaweedFS,
    tmp_path: Path,
) -> None:
    become_subreaper()  # the victim's writer, orphaned, is this process's to reap
    env = {"FREEZEFRAME_BLOBS": blobs_url}
    fleet = [
        start_proxy(
            mode="record",
            cassette=CASSETTE,
            store=postgres_url,
            env=env,
            args=("--durability", "strict"),
            data_dir=tmp_path / f"replica{n}",
        )
        for n in range(REPLICAS)
    ]
    victim = REPLICAS - 1
    children = writer_children(fleet[victim])
    assert len(children) == 1, "the victim records through a writer process"
    base = upstream.base_url
    tally = Tally()
    threads = [
        threading.Thread(
            target=drive,
            args=(proxy, base, n, c, VICTIM_ROUNDS if n == victim else ROUNDS, tally),
            daemon=True,
        )
        for n, proxy in enumerate(fleet)
        for c in range(CLIENTS)
    ]
    threads.append(threading.Thread(target=large, args=(fleet[0], base, 0, tally), daemon=True))
    for thread in threads:
        thread.start()

    wait_until("the victim acknowledges answers", lambda: tally.count(victim) >= KILL_AFTER)
    killed = fleet[victim].process
    assert killed is not None
    killed.send_signal(signal.SIGKILL)
    killed.wait(WAIT_S)
    ended: dict[int, int | None] = {}

    def writer_ended() -> bool:
        ended[children[0].pid] = killed_by(children[0].pid)
        return ended[children[0].pid] is not None

    wait_until("its writer process dies with it", writer_ended, 10)
    assert ended[children[0].pid] == signal.SIGKILL, "killed by PR_SET_PDEATHSIG, not exited"
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive(), "a client never finished"

    assert len(tally.failed.get(victim, ())) == CLIENTS, "every client of the victim was cut off"
    assert tally.finished.get(victim, 0) == 0, "the kill came mid-run"
    assert not {n: f for n, f in tally.failed.items() if n != victim}, tally.failed
    assert "large" in tally.acknowledged
    acknowledged = tally.acknowledged
    assert len(acknowledged) >= (REPLICAS - 1) * CLIENTS * ROUNDS * 3 + KILL_AFTER + 1

    # Stored: every acknowledged request, once, with the answer its client got.
    with open_store(postgres_url, blobs=blobs_url, outbox=tmp_path / "reader") as store:
        rows = store.exchanges(CASSETTE)
        stored: dict[str, list[int]] = {}
        for row in rows:
            exchange = store.exchange(CASSETTE, row.seq)
            rid = request_id(exchange.recorded.path, exchange.recorded.request_body)
            stored.setdefault(rid, []).append(row.seq)
            if rid in acknowledged and rid != "large":
                assert exchange.recorded.response is not None
                assert exchange.recorded.response.body == acknowledged[rid][1], rid
        assert not {rid: seqs for rid, seqs in stored.items() if len(seqs) > 1}, "stored twice"
        assert sorted(set(acknowledged) - set(stored)) == [], "acknowledged, not stored"
        assert len({row.seq for row in rows}) == len(rows)
        report = store.verify(CASSETTE)
        assert report.ok, report.detail

    verified = freezeframe("verify", CASSETTE, "--store", postgres_url, "--blobs", blobs_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # Every body the store names is in the bucket, under its digest; none in PostgreSQL.
    held = run_sql(postgres_url, "SELECT coalesce(sum(length(data)), 0) FROM blobs")[0][0]
    assert held == 0, "PostgreSQL holds no body bytes"
    named = run_sql(
        postgres_url,
        "SELECT b.digest, b.size FROM blobs b WHERE b.digest IN ("
        " SELECT request_body_digest FROM exchanges UNION"
        " SELECT response_body_digest FROM exchanges UNION"
        " SELECT canonical_digest FROM exchanges)",
    )
    bucket, _, prefix = blobs_url.removeprefix("s3://").partition("/")
    objects = seaweedfs.objects(bucket)
    assert named
    for name, size in named:
        body = objects.get(f"{prefix}/{name}")
        assert body is not None, f"{name} is named by the store and missing from the bucket"
        assert (digest(body), len(body)) == (name, size)
    assert digest(acknowledged["large"][1]) in {name for name, _ in named}

    # A surviving replica replays every acknowledged answer byte for byte, upstream unasked.
    survivor = fleet[1]
    switched = survivor.admin(
        "PUT", "/api/mode", json={"mode": "replay", "cassette": CASSETTE, "pace": "instant"}
    )
    assert switched.status_code == 200, switched.text
    asked = len(upstream.requests)
    with clients(survivor, base) as (http, chat):
        for rid, (request, body) in sorted(acknowledged.items()):
            assert send(http, chat, base, request) == body, f"{rid} replayed differently"
    assert len(upstream.requests) == asked, "replay never forwarded"
    for n, proxy in enumerate(fleet):
        if n != victim:
            assert proxy.stop() == 0
