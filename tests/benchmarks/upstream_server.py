"""The benchmark's upstream: ``tests/support/upstream.py``'s :class:`Upstream`, as its own process.

``bench_proxy.py`` starts it (pinned to the client's core) so that the fake provider's CPU
cost shows up neither in the client's numbers nor in the proxy's. It writes the throwaway
trustme CA to ``--ca-out``, prints one JSON line ``{"port": N}`` on stdout once it listens
on 127.0.0.1, and serves until SIGTERM/SIGINT, until its parent goes away, or until
``--max-seconds`` pass -- whichever comes first, so it can never outlive a benchmark.

Run by hand::

    PYTHONPATH=tests:. .venv/bin/python tests/benchmarks/upstream_server.py --ca-out /tmp/up-ca.pem
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT), str(ROOT / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from support.upstream import Upstream, make_ca, write_ca_pem  # noqa: E402

PARENT_POLL = 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ca-out", required=True, help="where to write the CA (PEM)")
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()

    ca = make_ca()
    write_ca_pem(ca, args.ca_out)
    with Upstream(ca, host="127.0.0.1") as up:
        # Upstream keeps every request it saw (bodies included) for tests to inspect; a
        # benchmark sends thousands of 20 KB bodies, so keep only the last few.
        up.requests = collections.deque(maxlen=32)  # type: ignore[assignment]
        print(json.dumps({"port": up.port}), flush=True)
        rounds = max(1, int(args.max_seconds / PARENT_POLL))
        for _ in range(rounds):
            if stop.wait(PARENT_POLL) or os.getppid() != parent:
                break
        if up.errors:
            print(json.dumps({"errors": [str(e) for e in up.errors[:5]]}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
