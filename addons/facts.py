"""The replay-kit facts of a recorded exchange, read from what is about to be stored.

They are read from the redacted request and response, the bytes the store keeps, so a
secret can never reach a fact column (evidence.facts reads them, for edits too).
"""

from __future__ import annotations

from freezeframe.addons._flows import FlowInfo
from freezeframe.canonicalize import FactValue, RequestView
from freezeframe.evidence.facts import exchange_facts
from freezeframe.storage import RecordedResponse


def recorded_facts(
    info: FlowInfo, request: RequestView, response: RecordedResponse | None
) -> dict[str, FactValue]:
    profile = info.canonical.profile if info.canonical is not None else None
    return exchange_facts(request, response, profile)
