"""CPU of ``Redactor.body`` on the bodies recording sees most, this tree against others.

    .venv/bin/python tests/benchmarks/bench_redaction.py                  # 92e8851 and this tree
    .venv/bin/python tests/benchmarks/bench_redaction.py --rev 92e8851 --rev HEAD --runs 400

Each body is redacted ``--runs`` times by each redactor (interleaved, so what load the
machine has falls on all of them alike) and the minimum and median of one call are
printed, in microseconds of ``time.perf_counter``. The bodies: a ~20 KB chat-completion
request (40 turns of prose, code and the words a name pass looks for: token, key,
password), a ~20 KB SSE answer (chat.completion.chunk events, the last with its usage), and
a 20-turn conversation whose request grows turn by turn (the total of its 20 requests).

``--rev`` loads ``storage/redaction.py`` as it was at a git revision (``git show``), next to
this tree's package: 92e8851 is the redactor before the rebuild of issue #29, which knew
fewer names and shapes (so it is the floor, not an equal). Recording CPU is issue #30.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from freezeframe.storage import redaction

ROOT = Path(__file__).resolve().parents[2]
KEY = bytes(range(32))
PROSE = (
    "The deploy failed again: the worker could not read its config, so I set the token "
    "refresh interval to 300 and retried. Can you check whether the key rotation job ran, "
    "and why the password reset mail says 'expired'? Here is the traceback:\n"
    '  File "app/auth.py", line 88, in refresh\n    raise TokenError(code=401)\n'
    "def refresh(session):\n    return session.post('/oauth/token', data={'grant_type': "
    "'refresh_token'})\n"
)


def chat_request(turns: int, n: int = 0) -> bytes:
    """A chat completion of ``turns`` turns, about 500 bytes each."""
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i} of {n}: {PROSE}",
        }
        for i in range(turns)
    ]
    body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2, "max_tokens": 512}
    return json.dumps(body).encode()


def sse_answer(size: int) -> bytes:
    """A streamed chat completion of about ``size`` bytes, a few words an event."""
    words = PROSE.split()
    events = []
    total = 0
    i = 0
    while total < size:
        chunk = {
            "id": "chatcmpl-9Qm7Vb3kP9sR2tW5nL8cF1hJ4",
            "object": "chat.completion.chunk",
            "created": 1732000000,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_0ba0d124f1",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": " " + words[i % len(words)]},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        events.append(event)
        total += len(event)
        i += 1
    usage = {"prompt_tokens": 5120, "completion_tokens": i, "total_tokens": 5120 + i}
    events.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


def load(rev: str) -> ModuleType:
    """``storage/redaction.py`` at ``rev``, as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:storage/redaction.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(f"redaction_{rev}", handle.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    Path(handle.name).unlink()
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", action="append", help="a git revision (repeatable)")
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    redactors: dict[str, Callable[[bytes], bytes]] = {}
    for rev in args.rev or ["92e8851"]:
        redactors[rev] = load(rev).Redactor(KEY).body
    redactors["this tree"] = redaction.Redactor(KEY).body
    known = (b"sk-proj-Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7Yg1Js5Pe",)
    request, answer = chat_request(40), sse_answer(20_000)
    conversation = [chat_request(turn + 1, turn) for turn in range(20)]
    bodies: dict[str, Callable[[Callable[[bytes], bytes]], object]] = {
        f"chat request ({len(request) // 1024} KB)": lambda body: body(request),
        f"SSE answer ({len(answer) // 1024} KB), 1 known secret": lambda body: body(answer, known),
        "20-turn conversation (total)": lambda body: [body(b) for b in conversation],
    }
    times: dict[tuple[str, str], list[float]] = {
        (what, name): [] for what in bodies for name in redactors
    }
    for _ in range(args.runs):
        for what, run in bodies.items():
            for name, body in redactors.items():
                start = time.perf_counter()
                run(body)
                times[what, name].append(time.perf_counter() - start)
    print(f"{args.runs} runs each; microseconds per call: min / median")
    for what in bodies:
        print(f"{what}:")
        for name in redactors:
            spent = times[what, name]
            print(f"  {name:>12}: {min(spent) * 1e6:8.0f} / {statistics.median(spent) * 1e6:8.0f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
