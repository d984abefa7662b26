"""How fast the command line answers: CPU of ``--help`` and of the store readers.

    .venv/bin/python tests/benchmarks/bench_cli.py                       # a 20,000-exchange store
    .venv/bin/python tests/benchmarks/bench_cli.py --keep /var/tmp/scale # reuse bench_scale's store
    .venv/bin/python tests/benchmarks/bench_cli.py --against ../main/.venv/bin/python

Each command runs ``--runs`` times in a fresh interpreter (``python -P -m freezeframe``, as the
console script does), and the CPU time (user + system) it used is read from the kernel when it
exits: the median and the fastest are printed. CPU, not wall time, because the machine's load
changes it less. ``--against PYTHON`` runs the same commands with another interpreter (another
checkout's venv) in alternation, so both see the same load. The goals of issue #21:
``--help`` at most 0.3 s and ``ls`` on 20,000 exchanges at most 0.5 s of CPU.

A script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests", ROOT / "tests" / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.append(str(path))

SIZE = 20_000
GOALS = {"--help": 0.3, "ls": 0.5}


def commands(data_dir: Path, cassette: str) -> list[tuple[str, list[str]]]:
    """What is timed: a name and its arguments."""
    store = ["--data-dir", str(data_dir)]
    return [
        ("--help", ["--help"]),
        ("ls", ["ls", *store]),
        ("ls --json", ["ls", "--json", *store]),
        (f"show {cassette}", ["show", cassette, *store]),  # 1,000 rows
        (f"verify {cassette}", ["verify", cassette, *store]),
        ("search step", ["search", f"step {SIZE - 1}", *store]),
    ]


def cpu_of(python: str, args: list[str]) -> float:
    """CPU seconds (user + system) one run of ``freezeframe ARGS`` used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [python, "-P", "-m", "freezeframe", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=300,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.decode().strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="where bench_scale.py keeps its stores")
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter")
    args = parser.parse_args(argv)
    from bench_scale import filled

    pythons = {"this": sys.executable} | ({"against": args.against} if args.against else {})
    with tempfile.TemporaryDirectory(prefix="freezeframe-cli-") as tmp:
        data_dir = (args.keep or Path(tmp)) / str(SIZE)
        data_dir.mkdir(parents=True, exist_ok=True)
        cassette, took = filled(data_dir, SIZE)
        if took:
            print(f"filled {SIZE:,} exchanges in {took:.0f} s")
        print(os.popen("uptime").read().strip())
        for name, arguments in commands(data_dir, cassette):
            cpu_of(sys.executable, arguments)  # the first listing of a store counts it once
            spent: dict[str, list[float]] = {who: [] for who in pythons}
            for _ in range(args.runs):
                for who, python in pythons.items():
                    spent[who].append(cpu_of(python, arguments))
            cells = [
                f"{who} median {statistics.median(s):.3f} s (fastest {min(s):.3f})"
                for who, s in spent.items()
            ]
            goal = f"   goal <= {GOALS[name]} s" if name in GOALS else ""
            print(f"{name:<22} " + "   ".join(cells) + goal)
        print(os.popen("uptime").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
