"""Exchanges another tool captured, made into recordings as the proxy would have made them.

A HAR file or a mitmproxy flow file holds requests as they were sent, secrets in the clear,
and no request keys. Before the store sees one, its secrets are replaced by the same markers
the proxy writes (storage.redaction, with this data dir's key), its key is computed by the
one ``canonicalize`` the proxy uses, and its facts are read as a recording's are
(evidence.facts); occurrences are counted per key in file order. So an imported capture
replays like a recording, and is as safe to keep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from freezeframe.canonicalize import KeyConfig, canonicalize
from freezeframe.evidence.recording import new_exchange
from freezeframe.evidence.requests import WireRequest
from freezeframe.storage import (
    Header,
    Imported,
    Message,
    Outcome,
    RecordedResponse,
    Slot,
)
from freezeframe.storage.redaction import Redactor


@dataclass(frozen=True)
class Captured:
    """One exchange as a capture file holds it."""

    method: str
    scheme: str
    host: str
    port: int
    path: str
    """Path and query string."""
    http_version: str
    request_headers: tuple[Header, ...]
    request_body: bytes
    started_at: float
    duration: float | None
    response: RecordedResponse | None
    outcome: Outcome
    error: str | None
    context: Mapping[str, str] = field(default_factory=dict)
    messages: tuple[Message, ...] | None = None


class Keeper:
    """Turns captured exchanges of one file into the records to import into ``cassette``."""

    def __init__(self, cassette: str, redactor: Redactor, config: KeyConfig) -> None:
        self._cassette = cassette
        self._redactor = redactor
        self._config = config
        self._seq = 0
        self._occurrences: dict[str, int] = {}

    def imported(self, captured: Captured) -> Imported:
        redactor = self._redactor
        secrets = redactor.secret_values(captured.request_headers, captured.path)
        headers = redactor.headers(captured.request_headers, secrets)
        found: set[bytes] = set()
        body = redactor.body(captured.request_body, secrets, found)
        secrets = tuple(sorted(set(secrets) | found, key=len, reverse=True))
        path = redactor.target(captured.path)
        response = captured.response
        if response is not None:
            response = RecordedResponse(
                status=response.status,
                reason=redactor.reason(response.reason, secrets),
                http_version=response.http_version,
                headers=redactor.headers(response.headers, secrets),
                body=redactor.answer(captured.method, path, redactor.body(response.body, secrets)),
                chunks=response.chunks,
                first_byte_at=response.first_byte_at,
                trailers=redactor.headers(response.trailers, secrets),
            )
        messages = captured.messages
        if messages is not None:
            messages = tuple(
                Message(m.from_client, m.text, m.at, redactor.body(m.data, secrets))
                for m in messages
            )
        stored = WireRequest(
            captured.method,
            captured.scheme,
            captured.host,
            captured.port,
            path,
            headers,
            body,
            captured.http_version,
        )
        view = stored.view()
        canonical = canonicalize(view, self._config)
        occurrence = self._occurrences.get(canonical.key, 0)
        self._occurrences[canonical.key] = occurrence + 1
        slot = Slot(self._seq, occurrence)
        self._seq += 1
        return Imported(
            new_exchange(
                self._cassette,
                stored,
                canonical,
                view,
                slot=slot,
                started_at=captured.started_at,
                duration=captured.duration,
                response=response,
                outcome=captured.outcome,
                error=redactor.text(captured.error) if captured.error else None,
                context={k: redactor.text(v) for k, v in captured.context.items()},
                messages=messages,
            )
        )
