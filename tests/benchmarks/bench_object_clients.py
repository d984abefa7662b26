"""Which S3 client freezeframe uses for --blobs: boto3 against obstore, measured on SeaweedFS
(boto3 is in the test extras; obstore is the ``s3`` extra freezeframe uses).

What the store does with a bucket: many small puts and gets (an agent's bodies are tens of
kilobytes), one large upload in parts (the >8 MiB spill), and ranged reads of it (replay).
Each client does the same work on the same SeaweedFS; the figures go to docs/production.md.

    .venv/bin/python tests/benchmarks/bench_object_clients.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from support.objectstore import SeaweedFS  # noqa: E402

SMALL = 200
SMALL_SIZE = 20 * 1024
LARGE_SIZE = 32 * 1024 * 1024
RANGE = 1024 * 1024


def timed(what: str, work: Callable[[], object]) -> float:
    began = time.perf_counter()
    work()
    seconds = time.perf_counter() - began
    print(f"  {what:<34} {seconds:7.3f} s")
    return seconds


def bench_boto3(server: SeaweedFS, bucket: str, small: list[bytes], large: bytes) -> None:
    import io

    import boto3
    from boto3.s3.transfer import TransferConfig

    client = boto3.client("s3", region_name="us-east-1")
    names = [f"boto3/small-{n}" for n in range(len(small))]
    parts = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
    print(f"boto3 {boto3.__version__}")
    timed(
        f"{SMALL} puts of {SMALL_SIZE // 1024} KiB",
        lambda: [
            client.put_object(Bucket=bucket, Key=n, Body=b)
            for n, b in zip(names, small, strict=True)
        ],
    )
    timed(
        f"{SMALL} gets",
        lambda: [client.get_object(Bucket=bucket, Key=n)["Body"].read() for n in names],
    )
    timed(
        f"1 put of {LARGE_SIZE >> 20} MiB (8 MiB parts)",
        lambda: client.upload_fileobj(io.BytesIO(large), bucket, "boto3/large", Config=parts),
    )
    timed(
        f"{LARGE_SIZE // RANGE} ranged gets of {RANGE >> 20} MiB",
        lambda: [
            client.get_object(Bucket=bucket, Key="boto3/large", Range=f"bytes={s}-{s + RANGE - 1}")[
                "Body"
            ].read()
            for s in range(0, LARGE_SIZE, RANGE)
        ],
    )


def bench_obstore(server: SeaweedFS, bucket: str, small: list[bytes], large: bytes) -> None:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        bucket,
        prefix="obstore",
        endpoint=server.endpoint,
        access_key_id=server.env["AWS_ACCESS_KEY_ID"],
        secret_access_key=server.env["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
        client_options={"allow_http": True},
    )
    names = [f"small-{n}" for n in range(len(small))]
    print(f"obstore {obstore.__version__}")
    timed(
        f"{SMALL} puts of {SMALL_SIZE // 1024} KiB",
        lambda: [obstore.put(store, n, b) for n, b in zip(names, small, strict=True)],
    )
    timed(f"{SMALL} gets", lambda: [bytes(obstore.get(store, n).bytes()) for n in names])
    timed(
        f"1 put of {LARGE_SIZE >> 20} MiB (8 MiB parts)",
        lambda: obstore.put(store, "large", large, chunk_size=8 * 1024 * 1024),
    )
    timed(
        f"{LARGE_SIZE // RANGE} ranged gets of {RANGE >> 20} MiB",
        lambda: [
            bytes(obstore.get_range(store, "large", start=s, end=s + RANGE))
            for s in range(0, LARGE_SIZE, RANGE)
        ],
    )


def main() -> None:
    small = [os.urandom(SMALL_SIZE) for _ in range(SMALL)]
    large = os.urandom(LARGE_SIZE)
    with tempfile.TemporaryDirectory() as directory:
        server = SeaweedFS(Path(directory))
        os.environ.update(server.env)
        server.start()
        try:
            bucket = server.bucket()
            for bench in (bench_boto3, bench_obstore, bench_boto3, bench_obstore):
                bench(server, bucket, small, large)
        finally:
            server.kill()


if __name__ == "__main__":
    main()
