"""What the store's writer reads into a recording before it stores it: facts and signals.

The proxy hands its recordings over unread (``NewExchange.to_read``): reading an
exchange's facts and triage's signals parses its bodies, and on the event loop that
cost every client of the proxy its time (#30's per-stage budget: the signals were the
largest stage, the facts the third). The store's writer, a process of its own by default,
calls the function ``reader()`` returns on each such exchange, one after another in the
order they were submitted, so a run's failures are found as the proxy found them.

``reader`` is named to the store by its dotted path (``READER``) rather than passed as a
callable, because the writer process imports it itself: the store below knows nothing of
evidence, and nothing crosses the process boundary but data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from freezeframe.evidence.facts import exchange_facts
from freezeframe.evidence.requests import WireRequest
from freezeframe.evidence.triage import RunReaders
from freezeframe.storage import NewExchange

READER = "freezeframe.evidence.reading_in:reader"
"""What open_store's ``reader`` is given by the proxy."""


def reader() -> Callable[[NewExchange], NewExchange]:
    """A reader of one writer's recordings, keeping the runs' failures found so far."""
    runs = RunReaders()

    def read(exchange: NewExchange) -> NewExchange:
        to_read = exchange.to_read
        if to_read is None:
            return exchange
        keyed = WireRequest(
            exchange.method,
            exchange.scheme,
            exchange.host,
            exchange.port,
            exchange.path,
            exchange.request_headers,
            b"",
            exchange.http_version,
        ).view_of(to_read.request_body)
        facts = exchange_facts(keyed, exchange.response, to_read.profile, to_read.answer)
        return runs.sign(dataclasses.replace(exchange, facts=facts, to_read=None))

    return read
