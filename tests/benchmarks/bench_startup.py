"""Replay start-up: the time to ``/health`` and to the first answer, and where it goes.

    .venv/bin/python tests/benchmarks/bench_startup.py                  # an empty store
    .venv/bin/python tests/benchmarks/bench_startup.py --sizes 0 20000 --keep /var/tmp/scale
    .venv/bin/python tests/benchmarks/bench_startup.py --sizes 20000 --keep /var/tmp/scale \
        --first-answer --runs 7 --against ../main   # before and after, interleaved

For each size (0: an empty store; otherwise a store bench_scale.py fills, kept with ``--keep``):

* ``to /health``: ``freezeframe run --mode replay`` from the process's start until ``/health``
  answers, the median of ``--runs`` starts, and the CPU time it had used by then;
* ``phases``: one start in this process, each step of proxy.serve timed from the moment the
  interpreter began (imports are the time before the first step);
* ``imports``: ``python -X importtime`` of the command line and ``proxy.serve``, self time
  summed by top-level package (freezeframe's by subpackage), the largest first.

With ``--first-answer``, what a client sees instead (bench_firstanswer.py): each start is
timed until its port accepts, until ``/health`` answers and until the first replayed answer
(a recorded POST sent the moment the port accepts), with the CPU the proxy and its writer
process had used by then; beside bare ``mitmdump`` (until its port accepts) and ``mitmdump
-S`` of a flow file holding that one exchange (until it answers), starts alternating so
that every row sees the same load, the least of ``--runs`` kept. ``--against CHECKOUT``
adds rows for another checkout of freezeframe run by this interpreter (a git worktree
sharing this venv), for a before and after in one run.

A script, not a test: start-up depends on the machine's load, so print ``uptime`` beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests", ROOT / "tests" / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.append(str(path))


_PHASES = (
    "client_bundle",
    "upstream_bundle",
    "open_store",
    "build_master",
    "create_app",
    "_start_proxy",
)


def to_health(data_dir: Path, cassette: str, runs: int) -> tuple[list[float], list[float]]:
    """Seconds to ``/health`` of each start, and the CPU seconds the process had used then
    (which depend less on the machine's load)."""
    import psutil
    from bench_scale import free_port, replay_command, started

    times: list[float] = []
    cpu: list[float] = []

    def used(pid: int) -> None:
        spent = psutil.Process(pid).cpu_times()
        cpu.append(spent.user + spent.system)

    for _ in range(runs):
        admin = free_port()
        cmd = replay_command(data_dir, cassette, admin)
        times.append(started(cmd, f"http://127.0.0.1:{admin}/health", admin, used)[0])
    return times, cpu


def phases(data_dir: Path, cassette: str) -> list[tuple[str, float, float]]:
    """Run this script again as ``--phases``: a fresh interpreter, so imports count."""
    out = subprocess.run(
        [sys.executable, __file__, "--phases", str(data_dir), cassette],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines() if line.count("\t") == 2]
    return [(name, float(at), float(took)) for name, at, took in rows]


def _timed_start(data_dir: str, cassette: str) -> None:
    """In a fresh interpreter that has imported only the standard library: import the CLI,
    start a replay with each phase of proxy.serve timed, print the phases (name, seconds since
    the process started, seconds taken), stop."""
    began = time.perf_counter() - _interpreter_age()
    from freezeframe import cli
    from freezeframe.proxy import serve

    marks: list[tuple[str, float, float]] = [("imports", time.perf_counter() - began, 0.0)]

    def timed(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(step):

            async def waited(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                result = await step(*args, **kwargs)
                marks.append((name, time.perf_counter() - began, time.perf_counter() - start))
                return result

            return waited

        def called(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = step(*args, **kwargs)
            marks.append((name, time.perf_counter() - began, time.perf_counter() - start))
            return result

        return called

    for name in _PHASES:
        setattr(serve, name, timed(name, getattr(serve, name)))
    whole = serve.serve

    async def until_ready(settings: Any, ready: asyncio.Event | None = None) -> None:
        ready, stop = ready or asyncio.Event(), asyncio.Event()

        async def report() -> None:
            await ready.wait()
            marks.append(("ready", time.perf_counter() - began, 0.0))
            stop.set()

        watcher = asyncio.create_task(report())
        await whole(settings, ready=ready, stop=stop)
        await watcher

    serve.serve = until_ready  # type: ignore[assignment]
    listen, admin = "127.0.0.1:0", "127.0.0.1:0"
    args = ["run", "--mode", "replay", "--cassette", cassette, "--data-dir", data_dir]
    try:
        cli.main([*args, "--listen", listen, "--admin", admin])
    except SystemExit as exit_:  # the CLI always exits
        if exit_.code:
            raise
    for name, at, took in marks:
        print(f"{name}\t{at:.4f}\t{took:.4f}")


def _interpreter_age() -> float:
    """Seconds since this process started (from /proc), so that imports count in full."""
    ticks = os.sysconf("SC_CLK_TCK")
    started_at = int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started_at / ticks


def imports(top: int = 12) -> list[tuple[str, float]]:
    """Self time of what ``freezeframe run`` imports before it starts (the command line and
    ``proxy.serve``), in ms, summed by top-level package (freezeframe's by subpackage)."""
    err = subprocess.run(
        [
            sys.executable,
            "-P",
            "-X",
            "importtime",
            "-c",
            "import freezeframe.cli, freezeframe.proxy.serve",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    ).stderr
    totals: collections.Counter[str] = collections.Counter()
    for line in err.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if found:
            parts = found.group(2).split(".")
            totals[".".join(parts[:2] if parts[0] == "freezeframe" else parts[:1])] += int(
                found.group(1)
            )
    whole = sum(totals.values()) / 1000
    return [("all", whole)] + [(name, us / 1000) for name, us in totals.most_common(top)]


def _first_answer(data_dir: Path, cassette: str, runs: int, against: Path | None) -> None:
    from bench_firstanswer import compare, report

    checkouts = {"this": ROOT} | ({"against": against.resolve()} if against else {})
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"{data_dir}: cassette {cassette}, {runs} starts each")
    for line in report(compare(data_dir, cassette, runs, checkouts)):
        print("    " + line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="where bench_scale.py keeps its stores")
    parser.add_argument(
        "--first-answer",
        action="store_true",
        help="time port, /health and the first replayed answer, beside mitmdump",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="with --first-answer: also another checkout, run by this interpreter",
    )
    parser.add_argument(
        "--phases", nargs=2, metavar=("DATA_DIR", "CASSETTE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.phases:
        _timed_start(*args.phases)
        return 0
    from bench_scale import filled

    # Every process started here runs this checkout: without it, `python -P -m freezeframe`
    # finds whichever checkout the venv's editable install points at (another worktree's).
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    print(os.popen("uptime").read().strip())
    print("imports:", "  ".join(f"{name} {ms:.0f} ms" for name, ms in imports()))
    with tempfile.TemporaryDirectory(prefix="freezeframe-startup-") as tmp:
        for size in args.sizes:
            if size:
                data_dir = (args.keep or Path(tmp)) / str(size)
                data_dir.mkdir(parents=True, exist_ok=True)
                cassette = filled(data_dir, size)[0]
            else:
                data_dir, cassette = Path(tmp) / "empty", "empty"
            if args.first_answer:
                _first_answer(data_dir, cassette, args.runs, args.against)
                continue
            times, cpu = to_health(data_dir, cassette, args.runs)
            steps = phases(data_dir, cassette)
            print(
                f"{size:>9,} exchanges: to /health median {statistics.median(times):.3f} s "
                f"({' '.join(f'{t:.3f}' for t in times)}); "
                f"CPU used by then, median {statistics.median(cpu):.3f} s"
            )
            print(
                "    phases: "
                + "  ".join(f"{n} {took * 1000:.0f} ms (at {at:.3f} s)" for n, at, took in steps)
            )
    print(os.popen("uptime").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
