"""Bodies in object storage: ``--blobs s3://BUCKET[/PREFIX]``.

A store that keeps its index in a database and its bodies in an S3-compatible bucket is how
systems that keep LLM traffic at volume do it: the bodies are most of the bytes, and a
database is the dearest place to keep bytes (its tables, its backups, its vacuum). With
``--blobs`` set, the SQL store keeps for each body only a row that names it (its digest and
size, data empty: storage.sql.bodies calls it *external*), and the body is an object named by
its blake3 digest, so an identical body is stored once across cassettes and replicas.

Objects hold a body's raw bytes, so that replay can read a large body by ranges and anyone
holding a digest can fetch the body with any S3 client; a body larger than MULTIPART_SIZE is
uploaded in parts of that size. An object is written before the row that names it commits
(storage.sql.writer), so a row never names an object that was never written.

While the bucket cannot be reached, a body goes to the outbox (Outbox): a bounded local
directory, fsynced, that readers look in first and that a thread empties into the bucket once
it answers again. A full outbox refuses the body, and its exchange is not recorded (the proxy
still answers; see docs/production.md).

The client library is obstore (Rust's object_store, from the Apache Arrow project; its S3,
GCS and Azure clients in one): docs/production.md says why, with the numbers. It is imported
only when ``--blobs`` is used, from the ``s3`` extra. It never goes through the environment's
HTTPS_PROXY (see ObjectStore).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from freezeframe.storage import blobs
from freezeframe.storage.errors import StoreError

log = logging.getLogger("freezeframe.storage")

SCHEMES = ("s3", "gs", "az")
"""The object stores --blobs speaks: obstore's S3, Google Cloud Storage and Azure Blob."""

CLOUD_HOSTS = (".amazonaws.com", ".googleapis.com", ".windows.net", "localhost", "127.0.0.1")
"""Where the clouds' object stores answer, reached direct (see ObjectStore)."""

MULTIPART_SIZE = 8 * 1024 * 1024
"""Bodies larger than this are uploaded in parts of this size (S3's minimum part is 5 MiB)."""

OUTBOX_BYTES = 1024 * 1024 * 1024
"""The most the outbox holds while the bucket is away (FREEZEFRAME_BLOBS_OUTBOX_BYTES)."""

RETRY_S = 2.0
"""How often the outbox tries the bucket again while it is away."""


class BlobsUnavailable(StoreError):
    """The object store cannot be reached, or refused a request."""


class BlobMissing(StoreError):
    """The object store has no object by that name."""


class BlobStore(ABC):
    """Bodies by digest, as whole objects. put() of a name already there is a no-op in
    effect (the bytes are the same: the name is their digest)."""

    location: str

    @abstractmethod
    def put(self, name: str, data: bytes) -> None: ...

    @abstractmethod
    def put_parts(self, name: str, pieces: Iterable[bytes]) -> None:
        """Store a body given piece by piece, never held whole (a multipart upload)."""

    @abstractmethod
    def get(self, name: str) -> bytes:
        """Raises BlobMissing or BlobsUnavailable."""

    @abstractmethod
    def get_range(self, name: str, start: int, end: int) -> bytes:
        """Bytes ``start`` up to ``end`` (exclusive) of a body."""

    @abstractmethod
    def exists(self, name: str) -> bool: ...

    @abstractmethod
    def delete(self, name: str) -> None: ...

    @abstractmethod
    def list(self) -> Iterator[tuple[str, float]]:
        """Every body stored: its name and when it was written (epoch seconds)."""


class ObjectStore(BlobStore):
    """A bucket (and a prefix in it) through obstore, configured from the cloud's standard
    environment: for S3, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    AWS_REGION (GOOGLE_* for gs://, AZURE_* for az://)."""

    def __init__(self, url: str) -> None:
        try:
            import obstore.store
        except ImportError:
            raise StoreError(
                f"--blobs {url}: object storage needs obstore: pip install 'freezeframe[s3]'"
            ) from None
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
        # Few, short tries: a writer that waits long on a bucket that is away holds every
        # exchange behind it, and the outbox is there for exactly that.
        retry: Any = {"max_retries": 1, "retry_timeout": timedelta(seconds=5)}
        client: Any = {
            "connect_timeout": "3s",
            "timeout": "30s",
            "allow_http": endpoint.startswith("http://"),
        }
        # Never through the environment's HTTPS_PROXY (which the HTTP client would read): in
        # an agent's shell it names freezeframe itself, which would record its own bodies.
        # A proxy named here turns the environment's off, and excluding every host from it
        # sends every request direct.
        direct = [urlsplit(endpoint).hostname or "", *CLOUD_HOSTS]
        client |= {"proxy_url": "http://127.0.0.1:9", "proxy_excludes": ",".join(direct)}
        try:
            self._store: Any = obstore.store.from_url(
                url, client_options=client, retry_config=retry
            )
        except Exception as exc:
            raise StoreError(f"--blobs {url}: {_first_line(exc)}") from None
        self.location = url.rstrip("/")

    def _call(self, what: str, name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self._store, *args, **kwargs)
        except FileNotFoundError:
            raise BlobMissing(f"body {name[:16]} is missing from {self.location}") from None
        except Exception as exc:
            raise BlobsUnavailable(
                f"cannot {what} body {name[:16]} in {self.location}: {_first_line(exc)}"
            ) from None

    def put(self, name: str, data: bytes) -> None:
        import obstore

        self._call("store", name, obstore.put, name, data, chunk_size=MULTIPART_SIZE)

    def put_parts(self, name: str, pieces: Iterable[bytes]) -> None:
        """Spooled to an unnamed temporary file first: given a file, obstore uploads parts
        of MULTIPART_SIZE, where an iterable's pieces would each be a part (S3 refuses parts
        under 5 MiB but the last)."""
        import obstore

        with tempfile.TemporaryFile() as spool:
            for piece in pieces:
                spool.write(piece)
            spool.seek(0)
            self._call(
                "store",
                name,
                obstore.put,
                name,
                spool,
                chunk_size=MULTIPART_SIZE,
                max_concurrency=4,
            )

    def get(self, name: str) -> bytes:
        import obstore

        found = self._call("read", name, obstore.get, name)
        return bytes(self._call("read", name, lambda _store: found.bytes()))

    def get_range(self, name: str, start: int, end: int) -> bytes:
        import obstore

        if end <= start:
            return b""
        return bytes(self._call("read", name, obstore.get_range, name, start=start, end=end))

    def exists(self, name: str) -> bool:
        import obstore

        try:
            self._call("find", name, obstore.head, name)
        except BlobMissing:
            return False
        return True

    def delete(self, name: str) -> None:
        import obstore

        self._call("delete", name, obstore.delete, name)

    def list(self) -> Iterator[tuple[str, float]]:
        import obstore

        try:
            for batch in obstore.list(self._store, chunk_size=1000):
                for meta in batch:
                    path = str(meta["path"])
                    if "/" not in path:
                        yield path, meta["last_modified"].timestamp()
        except Exception as exc:
            raise BlobsUnavailable(f"cannot list {self.location}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_blob_store(url: str) -> BlobStore:
    """The object store at ``url``: ``s3://BUCKET[/PREFIX]``, ``gs://…`` or ``az://…``;
    StoreError for anything else."""
    scheme, _, rest = url.partition("://")
    if scheme not in SCHEMES or not rest:
        raise StoreError(f"--blobs {url!r}: expected s3://BUCKET[/PREFIX] (or gs://, az://)")
    bucket = rest.partition("/")[0]
    if len(bucket) < 3:
        raise StoreError(f"--blobs {url!r}: a bucket name has 3 characters or more")
    return ObjectStore(url)


def outbox_for(blobs_url: str, outbox: Path | None = None, capacity: int = OUTBOX_BYTES) -> Outbox:
    """The object store at ``blobs_url`` behind an outbox in ``outbox`` (None: a folder
    for this object store under ~/.cache/freezeframe/outbox; the proxy passes one in its
    data dir)."""
    if outbox is None:
        outbox = (
            Path.home()
            / ".cache"
            / "freezeframe"
            / "outbox"
            / blobs.digest(blobs_url.encode())[:16]
        )
    return Outbox(open_blob_store(blobs_url), outbox, capacity, url=blobs_url)


class Outbox(BlobStore):
    """Bodies written while the object store is away, in a bounded local directory until
    it answers again. Readers look here first (get), so an exchange whose body waits here
    replays; a thread uploads them in the order they came and deletes each once stored."""

    def __init__(
        self,
        objects: BlobStore,
        directory: Path,
        capacity: int = OUTBOX_BYTES,
        *,
        url: str = "",
    ) -> None:
        self.objects = objects
        self.location = objects.location
        self.url = url
        """The --blobs URL it was opened from, for a writer process to open it again."""
        self.directory = directory
        self._directory = directory
        self._capacity = capacity
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self.problem: str | None = None
        """Why the object store is away; None while it answers."""
        directory.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._drain, name="freezeframe-outbox", daemon=True)
        self._thread.start()
        if self.waiting():
            self._wake.set()

    def waiting(self) -> list[Path]:
        return sorted(
            (p for p in self._directory.iterdir() if not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
        )

    def size(self) -> int:
        """Bytes waiting for the object store."""
        return sum(p.stat().st_size for p in self.waiting())

    def put(self, name: str, data: bytes) -> None:
        """Store a body in the object store, or in the outbox while it is away. Raises
        BlobsUnavailable when both are out of reach (the outbox is full)."""
        if self.problem is None:
            try:
                self.objects.put(name, data)
                return
            except BlobsUnavailable as exc:
                self._away(str(exc))
        self._keep(name, data)

    def put_parts(self, name: str, pieces: Iterable[bytes]) -> None:
        pieces = iter(pieces)
        if self.problem is None:
            kept: list[bytes] = []

            def remembered() -> Iterator[bytes]:
                for piece in pieces:
                    kept.append(piece)
                    yield piece

            try:
                self.objects.put_parts(name, remembered())
                return
            except BlobsUnavailable as exc:
                self._away(str(exc))
            pieces = iter([*kept, *pieces])
        self._keep(name, b"".join(pieces))

    def get(self, name: str) -> bytes:
        path = self._directory / name
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return self.objects.get(name)

    def get_range(self, name: str, start: int, end: int) -> bytes:
        path = self._directory / name
        try:
            with path.open("rb") as file:
                file.seek(start)
                return file.read(end - start)
        except FileNotFoundError:
            return self.objects.get_range(name, start, end)

    def exists(self, name: str) -> bool:
        return (self._directory / name).exists() or self.objects.exists(name)

    def delete(self, name: str) -> None:
        (self._directory / name).unlink(missing_ok=True)
        self.objects.delete(name)

    def list(self) -> Iterator[tuple[str, float]]:
        """What the object store holds (what waits here is named by rows only once its
        upload is done or retried, so a collector never deletes it: see storage.sql.gc)."""
        return self.objects.list()

    def _away(self, why: str) -> None:
        if self.problem is None:
            log.error("the object store is away, keeping bodies in %s: %s", self._directory, why)
        self.problem = why
        self._wake.set()

    def _keep(self, name: str, data: bytes) -> None:
        path = self._directory / name
        with self._lock:
            if path.exists():
                return
            if self.size() + len(data) > self._capacity:
                raise BlobsUnavailable(
                    f"the object store {self.location} is away and the outbox {self._directory} "
                    f"is full ({self._capacity} bytes): {self.problem}"
                )
            temporary = self._directory / f".{name}.{os.getpid()}"
            with temporary.open("wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            temporary.replace(path)
        self._wake.set()

    def _drain(self) -> None:
        while not self._stopping:
            self._wake.wait(RETRY_S)
            self._wake.clear()
            if self._stopping:
                return
            self.upload()

    def upload(self) -> int:
        """Upload what waits; how many bodies went. Clears the problem once all have."""
        sent = 0
        for path in self.waiting():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            if blobs.digest(data) != path.name:
                log.error("outbox file %s does not match its name; left for a person", path)
                path.rename(path.with_name(f".damaged-{path.name}"))
                continue
            try:
                self.objects.put(path.name, data)
            except BlobsUnavailable as exc:
                self.problem = str(exc)
                return sent
            path.unlink(missing_ok=True)
            sent += 1
        if self.problem is not None and not self.waiting():
            try:
                self.objects.exists("0" * 64)
            except BlobsUnavailable as exc:
                self.problem = str(exc)
                return sent
            log.info("the object store %s answers again: the outbox is empty", self.location)
            self.problem = None
        return sent

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread after one last try at uploading what waits (what still waits
        is uploaded by the next store opened on this outbox)."""
        deadline = time.monotonic() + timeout
        if self.problem is None and self.waiting():
            self.upload()
        self._stopping = True
        self._wake.set()
        self._thread.join(max(0.0, deadline - time.monotonic()))
