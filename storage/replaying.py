"""ReplayStore: what the proxy's replay asks a store, per request, on its hot path.

addons.replay finds a recording by key and occurrence (from memory once preloaded), counts
positions shared with other replicas in the store, and notes drift and misses; a miss is
answered with what the cassette holds, and a fork's answer is read against its source, so a
replayer also reads (ReplayStore extends ReadStore).
"""

from abc import abstractmethod
from collections.abc import Mapping, Sequence

from freezeframe.storage.reading import ReadStore
from freezeframe.storage.records import Candidate, Exchange, Miss


class ReplayStore(ReadStore):
    """Recordings looked up by request key and occurrence.

    count() and lookup() include exchanges that were submitted but not yet written, because
    the proxy asks them about its own recent requests; candidates() shows what has been
    written.
    """

    @abstractmethod
    def lookup(self, cassette: str, key: str, occurrence: int) -> Exchange | None:
        """The recording with this key and occurrence, bodies loaded; None if there is none.

        A body larger than storage.blobs.INLINE_LIMIT is not loaded: it comes back
        as b"" with a body_ref to read_blob() instead. A recording that was
        submitted but not yet written is waited for.
        """

    @abstractmethod
    def preload(self, cassette: str) -> int:
        """Load the cassette's recordings, in one query, for lookup() to answer from memory
        (storage.replaytable); how many it holds. Once loaded, a cassette is not read again
        until unload(): call it as often as convenient. A recording not held (recorded
        since, or past the table's size) is still found by lookup() in the store."""

    @abstractmethod
    def key_sent(self, cassette: str, digest: bytes) -> str | None:
        """The key of the cassette's preloaded recordings whose request was sent as the bytes
        of ``digest`` (storage.sent), or None: none held, or recordings under two keys. Reads
        memory only, so replay asks it before keying a request in full."""

    @abstractmethod
    def unload(self) -> None:
        """Forget every preloaded cassette, so that the next preload() reads what other
        processes changed since (replay starting from the top)."""

    @abstractmethod
    def claim(self, session: str, cassette: str, key: str) -> int:
        """The next occurrence of ``key`` that replay session ``session`` serves, counted in
        the store, so that proxy replicas replaying one session together hand out each
        recording once: 0 for the first claim, and so on. One round trip, atomic."""

    @abstractmethod
    def release(self, session: str) -> None:
        """Start replay session ``session`` from the top: forget what it has claimed."""

    @abstractmethod
    def count(self, cassette: str, key: str) -> int:
        """How many recordings of this key the cassette has, counting submitted ones."""

    @abstractmethod
    def candidates(
        self, cassette: str, method: str, host: str, path: str, limit: int = 200
    ) -> list[Candidate]:
        """Recorded requests to compare a missed request against, likeliest first.

        Those with the same method, host and path (query string ignored) come first,
        then the rest of the cassette, up to ``limit``.
        """

    @abstractmethod
    def note_drift(
        self, cassette: str, seq: int, paths: Sequence[str], context: Mapping[str, str]
    ) -> None:
        """Note that a replay served exchange ``seq`` to a request whose stripped parts
        ``paths`` differed, sent with run context ``context``.

        Returns at once: the note is written on the writer thread, after every exchange
        submitted before it; one on an exchange the store does not hold is logged and
        dropped. Notes are not part of the chain. Raises StoreClosed after close().
        """

    @abstractmethod
    def note_miss(self, miss: Miss) -> None:
        """Keep a replay miss, as its client was answered, for misses() to list.

        Returns at once: it is written on the writer thread, after every exchange
        submitted before it. Misses are observations, not part of any chain. Raises
        StoreClosed after close().
        """
