"""Micro-benchmark: µs per `canonicalize()` call on typical request bodies, before and after.

A script, not a test: it asserts nothing about speed. Run it from the repository root::

    .venv/bin/python tests/benchmarks/bench_canonicalize.py              # working tree vs HEAD
    .venv/bin/python tests/benchmarks/bench_canonicalize.py --against REV
    .venv/bin/python tests/benchmarks/bench_canonicalize.py --against none

"after" is the `canonicalize` package of the working tree; "before" is the same package as
committed at `--against` (default HEAD), extracted with `git archive` into a temporary
directory and imported under another name (the package uses relative imports only), so both
run in one process on the same inputs. Each row also checks that both give the same form and
key, byte for byte.

Bodies: the ~20 KB OpenAI chat-completion conversation of `bench_proxy.py` (workload a), the
same grown to ~200 KB, an Anthropic Messages request with tools (~20 KB, numbers and nested
schemas), and an MCP `tools/call` with `_meta` (a few hundred bytes).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FILLER = (
    "The agent inspected the repository, ran the failing test, read the traceback and "
    "proposed a patch to the parser that keeps byte offsets stable across retries. "
)


def chat_body(target_size: int) -> bytes:
    """The same conversation as `bench_proxy.chat_body`, to any size."""
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a careful coding agent. Answer tersely."}
    ]
    turn = 0
    while len(json.dumps(messages)) < target_size - 400:
        role = "user" if turn % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"[turn {turn}] " + FILLER * 3})
        turn += 1
    messages.append({"role": "user", "content": "Summarise what you did in one sentence."})
    body = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "temperature": 0.2,
        "max_tokens": 256,
        "user": "bench",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def anthropic_body(target_size: int = 20_000) -> bytes:
    """A Messages request with tool definitions, tool use and non-ASCII text."""
    tools = [
        {
            "name": f"tool_{i}",
            "description": f"Tool number {i}: reads a file and returns its lines — «quoted».",
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A path\nrelative to the root"},
                    "start": {"type": "integer", "minimum": 0, "maximum": 100000},
                    "ratio": {"type": "number", "default": 0.75},
                },
                "required": ["path"],
            },
        }
        for i in range(12)
    ]
    messages: list[dict[str, Any]] = []
    turn = 0
    while len(json.dumps({"tools": tools, "messages": messages})) < target_size - 400:
        messages.append({"role": "user", "content": f"Step {turn}: 日本語も少し。 " + FILLER})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading the file.\tOK"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn:04d}",
                        "name": "tool_1",
                        "input": {"path": f"src/m{turn}.py", "start": turn * 10, "ratio": 0.5},
                    },
                ],
            }
        )
        turn += 1
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "temperature": 1.0,
        "top_p": 0.95,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": tools,
        "messages": messages,
        "metadata": {"user_id": "u-123"},
    }
    return json.dumps(body).encode()


def mcp_body() -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {
            "name": "search_files",
            "arguments": {"pattern": "def main", "path": "/repo", "max_results": 20},
            "_meta": {"progressToken": 7, "traceparent": "00-abc-def-01"},
        },
    }
    return json.dumps(body).encode()


def cases(package: ModuleType) -> dict[str, Any]:
    view = package.RequestView

    def post(path: str, body: bytes, host: str = "api.openai.com") -> Any:
        return view(
            method="POST",
            scheme="https",
            host=host,
            port=443,
            path=path,
            query=(),
            headers=(
                ("content-type", "application/json"),
                ("authorization", "Bearer sk-bench"),
                ("anthropic-version", "2023-06-01"),
                ("mcp-protocol-version", "2025-06-18"),
            ),
            body=body,
            content_type="application/json",
        )

    return {
        "chat 20 KB": post("/v1/chat/completions", chat_body(20_000)),
        "chat 200 KB": post("/v1/chat/completions", chat_body(200_000)),
        "anthropic+tools 20 KB": post("/v1/messages", anthropic_body(), "api.anthropic.com"),
        "mcp tools/call": post("/mcp", mcp_body(), "localhost"),
    }


def per_call_us(calls: list[Callable[[], object]], budget: float) -> list[float]:
    """µs per call of each, the least over 7 rounds (the least disturbed by other load).

    The rounds take the calls in turn, so a burst of load elsewhere hits each alike.
    """
    numbers = []
    for call in calls:
        call()
        start = time.perf_counter()
        call()
        once = max(time.perf_counter() - start, 1e-7)
        numbers.append(max(1, int(budget / 7 / len(calls) / once)))
    best = [float("inf")] * len(calls)
    for _ in range(7):
        for index, (call, number) in enumerate(zip(calls, numbers, strict=True)):
            start = time.perf_counter()
            for _ in range(number):
                call()
            best[index] = min(best[index], (time.perf_counter() - start) / number * 1e6)
    return best


def load_revision(rev: str, into: Path) -> ModuleType:
    """Import the `canonicalize` package as committed at `rev`, as `canonicalize_<rev>`."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "canonicalize"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    name = "canonicalize_before"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "canonicalize").rename(into / name)
    sys.path.insert(0, str(into))
    return importlib.import_module(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--against", default="HEAD", help="git revision for 'before', or none")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per body")
    args = parser.parse_args()

    after = importlib.import_module("canonicalize")
    with tempfile.TemporaryDirectory() as tmp:
        before = None if args.against == "none" else load_revision(args.against, Path(tmp))
        version = sys.version.split()[0]
        print(f"python {version}; µs per canonicalize() call, best of 7 interleaved rounds")
        print(f"{'body':<24}{'bytes':>8}{'before':>11}{'after':>11}{'speed-up':>10}  same form")
        for label, view in cases(after).items():
            new = after.canonicalize(view)
            if before is None:
                (t_after,) = per_call_us([lambda v=view: after.canonicalize(v)], args.budget)
                print(f"{label:<24}{len(view.body):>8}{'':>11}{t_after:>11.1f}")
                continue
            old_view = before.RequestView(**{f: getattr(view, f) for f in view.__slots__})
            old = before.canonicalize(old_view)
            same = old.form == new.form and old.key == new.key
            t_before, t_after = per_call_us(
                [lambda v=old_view: before.canonicalize(v), lambda v=view: after.canonicalize(v)],
                args.budget,
            )
            print(
                f"{label:<24}{len(view.body):>8}{t_before:>11.1f}{t_after:>11.1f}"
                f"{t_before / t_after:>9.1f}x  {'yes' if same else 'NO'}"
            )


if __name__ == "__main__":
    main()
