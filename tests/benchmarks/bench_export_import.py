"""Benchmark: a cassette holding a 1 GiB body, exported to a bundle, a jsonl file and a HAR
file, and the bundle and the jsonl file imported back, each with its time and how much the
process's resident memory grew. A script, not a test. Run it from the repository root::

    .venv/bin/python tests/benchmarks/bench_export_import.py [--size-mib 1024]

Memory should stay flat (tens of MiB whatever the size): the body moves part by part.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parents[2]), str(Path(__file__).parents[1])]

from support.exchanges import plausible_exchange, plausible_response  # noqa: E402
from support.memory import peak_rss  # noqa: E402

from freezeframe.exchange_formats import Keeper, export_cassette, open_import  # noqa: E402
from freezeframe.storage import open_store  # noqa: E402


def no_keeper(cassette: str) -> Keeper:
    raise AssertionError("an export needs no keying")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    size = parser.parse_args().size_mib * 1024 * 1024
    with tempfile.TemporaryDirectory() as where, open_store(f"sqlite:///{where}/ff.db") as store:
        writer = store.blob_writer()
        # 1 MiB that zstd cannot shrink much, varied by its first byte.
        block = b"".join(hashlib.sha256(n.to_bytes(4)).digest() for n in range(32768))
        for index in range(size // len(block)):
            writer.write(bytes([index % 251]) + block[1:])
        ref = writer.finish()
        store.submit(
            plausible_exchange(
                store.reserve("big", "k"),
                cassette="big",
                response=plausible_response(body=b"", body_ref=ref),
            )
        )
        store.flush(600)
        print(f"body: {ref.size / 2**20:,.0f} MiB")
        for format_ in ("bundle", "jsonl", "har"):
            path = Path(where) / f"big.{format_}"
            started = time.perf_counter()
            with peak_rss(os.getpid()) as rss:
                export_cassette(store, "big", path, format_)
            report("export " + format_, started, rss, path.stat().st_size)
        for format_ in ("bundle", "jsonl"):
            started = time.perf_counter()
            with peak_rss(os.getpid()) as rss:
                opened = open_import(Path(where) / f"big.{format_}", f"copy-{format_}", no_keeper)
                store.import_cassette(opened.cassette, opened.exchanges)
            report("import " + format_, started, rss, None)


def report(what: str, started: float, rss: list[int], size: int | None) -> None:
    written = f", file {size / 2**20:,.0f} MiB" if size is not None else ""
    print(
        f"{what:14} {time.perf_counter() - started:7.1f} s, "
        f"memory grew {(rss[1] - rss[0]) / 2**20:6.1f} MiB{written}"
    )


if __name__ == "__main__":
    main()
