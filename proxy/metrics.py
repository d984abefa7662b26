"""``GET /metrics``: what the proxy and its store have done, in Prometheus' text format.

The counts already exist (the runtime tally, the store writer's totals); a scrape reads
them, so nothing on the request path changes for metrics and nothing is counted twice.
Each proxy has its own registry: two proxies in one process (the tests) do not mix.
Label values are hosts and cassette names, which a deployment has few of; a request's
path or key is never a label. Failures are counted by kind (evidence.signatures.KINDS, a
fixed set), never by signature, whose text has no bound; they are read from the store's
stored signatures (evidence.triage), again only once this proxy wrote more exchanges or
FAILURES_EVERY_S seconds have passed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from freezeframe.addons.state import Tally
from freezeframe.evidence.signatures import KINDS
from freezeframe.evidence.triage import stored_occurrences
from freezeframe.storage import Store, StoreError

FAILURES_EVERY_S = 30.0
"""How long a count of failures by kind is reused while this proxy writes nothing new: a
scrape every few seconds does not read the store's signatures each time."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Collector(Collector):
    def __init__(self, tally: Tally, store: Store) -> None:
        self._tally = tally
        self._store = store
        self._lock = threading.Lock()
        self._failures: tuple[float, int, Counter[str]] | None = None

    def collect(self) -> Iterator[Metric]:
        counts = self._tally.counts()
        recorded = CounterMetricFamily(
            "freezeframe_exchanges_recorded",
            "Exchanges recorded, by upstream host, HTTP status (empty: no answer) and outcome.",
            labels=("host", "status", "outcome"),
        )
        rate_limited = CounterMetricFamily(
            "freezeframe_rate_limited",
            "Answers with status 429 recorded, by host.",
            labels=("host",),
        )
        truncated = CounterMetricFamily(
            "freezeframe_truncated",
            "Answers recorded cut off before their end, by host.",
            labels=("host",),
        )
        limited: dict[str, int] = {}
        cut: dict[str, int] = {}
        for (host, status, outcome), n in sorted(counts.recorded.items()):
            recorded.add_metric((host, status, outcome), n)
            if status == "429":
                limited[host] = limited.get(host, 0) + n
            if outcome == "truncated":
                cut[host] = cut.get(host, 0) + n
        for host, n in sorted(limited.items()):
            rate_limited.add_metric((host,), n)
        for host, n in sorted(cut.items()):
            truncated.add_metric((host,), n)
        yield recorded
        yield rate_limited
        yield truncated
        for name, help_text, counter in (
            ("freezeframe_replay_hits", "Requests replay answered, by cassette.", counts.replayed),
            ("freezeframe_replay_misses", "Requests replay had no recording for.", counts.missed),
            (
                "freezeframe_replay_drift",
                "Replayed requests that differed from the recording in what the key ignores.",
                counts.drifted,
            ),
        ):
            family = CounterMetricFamily(name, help_text, labels=("cassette",))
            for cassette, n in sorted(counter.items()):
                family.add_metric((cassette,), n)
            yield family
        yield from self._store_metrics()
        yield from self._failure_metrics()

    def _failure_metrics(self) -> Iterator[Metric]:
        counted = self._failure_counts()
        if counted is None:
            return  # the store did not answer: no figure rather than a wrong one
        family = GaugeMetricFamily(
            "freezeframe_failures",
            "Failures in the store's runs, by kind (as freezeframe triage groups them).",
            labels=("kind",),
        )
        for kind in KINDS:
            family.add_metric((kind,), counted.get(kind, 0))
        yield family

    def _failure_counts(self) -> Counter[str] | None:
        """Failures by kind: counted again once this proxy has written more exchanges, or
        FAILURES_EVERY_S after the last count (for what other processes wrote)."""
        with self._lock:
            now, written = time.monotonic(), self._store.stats().exchanges
            if self._failures is not None:
                at, counted_at, found = self._failures
                if counted_at == written and now - at < FAILURES_EVERY_S:
                    return found
            try:
                found = Counter(o.kind for o in stored_occurrences(self._store.triage_rows()))
            except StoreError:
                return None
            self._failures = (now, written, found)
            return found

    def _store_metrics(self) -> Iterator[Metric]:
        outbox = self._store.outbox()
        if outbox is not None:
            up, waiting = outbox
            yield GaugeMetricFamily(
                "freezeframe_object_store_up",
                "1 while the object store (--blobs) answers and nothing waits for it, else 0.",
                value=int(up),
            )
            yield GaugeMetricFamily(
                "freezeframe_outbox_bytes",
                "Bytes of bodies waiting in the local outbox for the object store.",
                value=waiting,
            )
        stats = self._store.stats()
        yield GaugeMetricFamily(
            "freezeframe_store_queue_depth",
            "Exchanges, notes and bodies waiting for the store's writer.",
            value=stats.queued,
        )
        yield SummaryMetricFamily(
            "freezeframe_store_write_seconds",
            "Transactions that committed recorded exchanges, and the time they took.",
            count_value=stats.batches,
            sum_value=stats.write_seconds,
        )
        yield CounterMetricFamily(
            "freezeframe_store_exchanges_written",
            "Exchanges committed to the store.",
            value=stats.exchanges,
        )
        yield CounterMetricFamily(
            "freezeframe_store_bodies_stored",
            "Bodies new to the store, each stored once.",
            value=stats.bodies_stored,
        )
        yield CounterMetricFamily(
            "freezeframe_store_body_bytes",
            "Bytes of the bodies new to the store, as sent.",
            value=stats.body_bytes,
        )
        yield CounterMetricFamily(
            "freezeframe_store_stored_bytes",
            "Bytes those bodies take in the store: compressed, or as deltas of earlier ones.",
            value=stats.stored_bytes,
        )
        yield CounterMetricFamily(
            "freezeframe_store_bodies_deduplicated",
            "Bodies the store already held, so that only a reference was written.",
            value=stats.bodies_deduplicated,
        )
        yield CounterMetricFamily(
            "freezeframe_store_deduplicated_bytes",
            "Bytes of those bodies: what deduplication saved.",
            value=stats.deduplicated_bytes,
        )


class Metrics:
    """The proxy's registry; ``render()`` is a scrape."""

    def __init__(self, tally: Tally, store: Store) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Collector(tally, store))

    def render(self) -> bytes:
        return generate_latest(self._registry)
