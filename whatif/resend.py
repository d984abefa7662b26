"""``freezeframe resend``: one recorded request sent upstream again, its new answer recorded.

"How does the new model snapshot answer the exact same bytes?" is a question about one
request, so this sends exactly that: the recorded method, URL, headers and body, with only the
changes asked for (``--set`` on a JSON body, ``--header``). Secrets were never stored, so a
header kept as a redaction marker must be given again with ``--header``; the request is not
sent with a marker in it. The answer is recorded into the ``--into`` cassette as the proxy
records one (redacted, chunk by chunk with its times, keyed by the same canonicalize), with an
Origin naming the exchange it was resent from.
"""

from __future__ import annotations

import copy
import json
import ssl
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from freezeframe.canonicalize import KeyConfig, canonicalize, eventstream
from freezeframe.canonicalize.diff import json_differences
from freezeframe.canonicalize.jsonbody import encode_json_utf8
from freezeframe.canonicalize.profiles.mcp import is_json_rpc_request
from freezeframe.evidence.facts import exchange_facts
from freezeframe.evidence.inert import inert
from freezeframe.evidence.recording import new_exchange
from freezeframe.evidence.requests import WireRequest, stored_view
from freezeframe.evidence.response_ids import replaced_ids
from freezeframe.providers.answers import reassembled
from freezeframe.providers.apis import ApiReader, api_of
from freezeframe.providers.bodies import json_text, media_type
from freezeframe.providers.mcp_headers import MirrorError, mirror
from freezeframe.storage import (
    Chunk,
    Edit,
    Exchange,
    Header,
    Origin,
    Outcome,
    RecordedResponse,
    Store,
    WriteStore,
    boundedjson,
)
from freezeframe.storage.encodings import content_codings, decode_body, encode
from freezeframe.storage.inflight import Body, Landed
from freezeframe.storage.redaction import Redactor
from freezeframe.whatif.editing import Assignment, EditError, put_at

TIMEOUT_S = 120.0
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"content-length"}
)
MARKER = b"[redacted:"


@dataclass(frozen=True, slots=True)
class Resent:
    cassette: str
    seq: int
    status: int | None
    outcome: str
    differences: tuple[tuple[str, str, str], ...]
    """(what, recorded, new) for each difference between the two answers."""
    ids: tuple[tuple[str, str], ...] = ()
    """(recorded id, new id) for each id a Responses answer minted anew (``resp_…``, its
    items' ``id`` and ``call_id``): replaying a fork maps the new ones back."""
    forked: bool = False
    """Whether ``cassette`` is a fork of the source with the new answer at ``seq``."""


def resend(
    store: Store,
    exchange: Exchange,
    into: str,
    *,
    sets: Sequence[Assignment],
    headers: Sequence[tuple[str, str]],
    redactor: Redactor,
    config: KeyConfig,
    verify: ssl.SSLContext | bool,
    proxy: str | None,
    fork: bool = False,
) -> Resent:
    """Send ``exchange``'s request again and record the answer into ``into``: alone, or
    with ``fork`` as a fork of the source in which ``exchange`` answers with it (as
    ``edit`` makes one), so the rest of the run replays around the new answer. A Responses
    answer's new ids are paired with the recorded ones; a replay of the fork keys the
    later requests that name the new ids as the recorded requests that named the old."""
    where = f"{exchange.recorded.cassette}#{exchange.seq}"
    if exchange.recorded.request_body_ref is not None:
        raise EditError(f"{where}: the request body is too large to resend from here")
    sent_headers, body = _request(exchange, sets, headers, where)
    secrets = redactor.secret_values(sent_headers, exchange.recorded.path)
    started = time.time()
    chunks: list[Chunk] = []
    received = bytearray()
    response: RecordedResponse | None = None
    outcome, error = Outcome.COMPLETE, None
    with httpx.Client(verify=verify, proxy=proxy, timeout=TIMEOUT_S, trust_env=False) as client:
        request = client.build_request(
            exchange.recorded.method,
            exchange.url,
            headers=[(n.decode("latin-1"), v.decode("latin-1")) for n, v in sent_headers],
            content=body,
        )
        try:
            answer = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            outcome, error = Outcome.FAILED, str(exc)
        else:
            try:
                first = time.time() - started
                try:
                    for piece in answer.iter_raw():
                        chunks.append(Chunk(len(received), time.time() - started))
                        received += piece
                except httpx.HTTPError as exc:
                    outcome, error = Outcome.TRUNCATED, str(exc)
                landed = _landed(redactor, secrets, answer.headers.raw, bytes(received))
                response = RecordedResponse(
                    status=answer.status_code,
                    reason=redactor.reason(answer.reason_phrase, secrets),
                    http_version=answer.http_version,
                    headers=landed.headers(redactor.headers(answer.headers.raw, secrets)),
                    body=redactor.answer(
                        exchange.recorded.method, exchange.recorded.path, landed.stored
                    ),
                    chunks=tuple(chunks),
                    first_byte_at=first,
                )
            finally:
                answer.close()
    sent = _landed(redactor, secrets, sent_headers, body)
    stored = WireRequest(
        exchange.recorded.method,
        exchange.recorded.scheme,
        exchange.recorded.host,
        exchange.recorded.port,
        exchange.recorded.path,
        sent.headers(redactor.headers(sent_headers, secrets)),
        sent.stored,
        exchange.recorded.http_version,
    )
    keyed = stored.view()
    canonical = canonicalize(keyed, config)
    differences = _differences(
        exchange.recorded.response,
        response,
        api_of(exchange.recorded.method, exchange.recorded.path),
    )
    if fork:
        return _forked(store, exchange, into, response, outcome, sets, differences, config)
    slot = store.reserve(into, canonical.key)
    store.submit(
        new_exchange(
            into,
            stored,
            canonical,
            keyed,
            slot=slot,
            started_at=started,
            duration=time.time() - started,
            response=response,
            outcome=outcome,
            error=redactor.text(error) if error else None,
            context=dict(exchange.recorded.context),
            origin=Origin("resent", exchange.recorded.cassette, exchange.seq, exchange.chain),
        )
    )
    store.flush(30)
    return Resent(
        cassette=into,
        seq=slot.seq,
        status=response.status if response else None,
        outcome=outcome.value,
        differences=differences,
        ids=replaced_ids(exchange, store.exchange(into, slot.seq)),
    )


def _forked(
    store: WriteStore,
    exchange: Exchange,
    into: str,
    response: RecordedResponse | None,
    outcome: Outcome,
    sets: Sequence[Assignment],
    differences: tuple[tuple[str, str, str], ...],
    config: KeyConfig,
) -> Resent:
    """``into`` as a fork of the source with the new answer in ``exchange``'s place; the
    request stays the recorded one (it is what the agent sends on replay)."""
    where = f"{exchange.recorded.cassette}#{exchange.seq}"
    if response is None or outcome is not Outcome.COMPLETE:
        raise EditError(f"{where}: the resent request got no whole answer ({outcome.value}), "
                        "so there is none to fork with")  # fmt: skip
    view = stored_view(exchange)
    changes = (
        "resent upstream" + "".join(f", {a.path.text} changed" for a in sets),
        *(f"{what}: {recorded} -> {new}" for what, recorded, new in differences),
    )
    facts = exchange_facts(view, response, canonicalize(view, config).profile)
    store.fork(
        exchange.recorded.cassette, into, edits={exchange.seq: Edit(response, facts, changes)}
    )
    copy = store.exchange(into, exchange.seq)
    return Resent(
        cassette=into,
        seq=exchange.seq,
        status=response.status,
        outcome=outcome.value,
        differences=differences,
        ids=replaced_ids(exchange, copy),
        forked=True,
    )


def _request(
    exchange: Exchange,
    sets: Sequence[Assignment],
    headers: Sequence[tuple[str, str]],
    where: str,
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The request to send: recorded, but for the changes, and never with a marker in it."""
    replaced = {name.lower().encode("latin-1") for name, _ in headers}
    sent = [
        (name, value)
        for name, value in exchange.recorded.request_headers
        if name.lower() not in _HOP_BY_HOP and name.lower() not in replaced
    ]
    given = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    body = exchange.recorded.request_body
    if sets:
        found = decode_body(body, exchange.recorded.request_headers)
        try:
            document: Any = boundedjson.loads(found.data if found.whole else b"")
        except ValueError:
            raise EditError(f"{where}: --set edits a JSON request, and this one is not") from None
        recorded = copy.deepcopy(document)
        for assignment in sets:
            places = assignment.path.find(document)
            if not places:
                raise EditError(f"{where}: --set {assignment.path.text} selects nothing")
            for location, _ in places:
                document = put_at(document, location, assignment.value)
        raw = json.dumps(document, ensure_ascii=False).encode()
        body = encode(raw, content_codings(exchange.recorded.request_headers))
        if is_json_rpc_request(recorded):
            try:  # MCP's mirrored headers (Mcp-Method, Mcp-Name, Mcp-Param-*) follow the body
                sent = mirror(sent, recorded, document)
            except MirrorError as exc:
                raise EditError(f"{where}: {exc}") from None
    sent += given
    for name, value in sent:
        if MARKER in value:
            raise EditError(
                f"{where}: the recorded {name.decode('latin-1')} header is stored redacted; "
                f"give it with --header '{name.decode('latin-1')}: …' (it was never stored)"
            )
    if MARKER in body:
        raise EditError(f"{where}: the recorded body holds a redacted secret; it cannot be resent")
    return sent, body


def _landed(
    redactor: Redactor, secrets: Sequence[bytes], headers: Sequence[Header], data: bytes
) -> Landed:
    """A body as the proxy would store it (storage.inflight): redacted once, inside its
    content coding too, so a secret in a compressed answer is no more stored than the
    proxy would store it."""
    body = Body(redactor, secrets, headers, hold=None)
    body.feed(data)
    return body.end()


def _differences(
    recorded: RecordedResponse | None, new: RecordedResponse | None, api: ApiReader | None
) -> tuple[tuple[str, str, str], ...]:
    """How the new answer differs from the recorded one: status, then the body's JSON paths.
    Two streamed answers of a model API are compared reassembled, as whole answers: the same
    paths a whole answer's diff names (``$.choices[0].message.content``), not SSE bytes."""
    if recorded is None or new is None:
        return (("answer", "none" if recorded is None else str(recorded.status),
                 "none" if new is None else str(new.status)),)  # fmt: skip
    found: list[tuple[str, str, str]] = []
    if recorded.status != new.status:
        found.append(("status", str(recorded.status), str(new.status)))
    old_body, new_body = _comparable(recorded), _comparable(new)
    streamed = media_type(recorded.headers) == media_type(new.headers) == "text/event-stream"
    if api is not None and streamed:
        old_body = encode_json_utf8(reassembled(api, old_body))
        new_body = encode_json_utf8(reassembled(api, new_body))
    found += [
        (d.path, d.recorded, d.live)
        for d in json_differences(new_body, old_body)
        if not d.path.endswith(VOLATILE_ANSWER_FIELDS)
    ]
    return tuple(found)


VOLATILE_ANSWER_FIELDS = (".responseId",)
"""Answer fields new on every call whatever was asked (Gemini's ``responseId``): a resent
answer differs in them always, which says nothing about the answer."""


def _comparable(response: RecordedResponse) -> bytes:
    """The decoded body; an AWS event stream as the JSON list of its events (as boto3 reads
    them, Bedrock's random padding left out), so a difference names the event that changed."""
    body = decode_body(response.body, response.headers).data
    content_type = b", ".join(v for n, v in response.headers if n.lower() == b"content-type")
    if eventstream.is_event_stream(content_type.decode("latin-1")):
        events, _ = eventstream.json_events(body)
        return json_text([*events]).encode()
    return body


def resent_lines(cassette: str, seq: int, resent: Resent) -> Iterator[str]:
    """What ``resend`` prints: where the new answer went, how it differs from the recorded
    one, and the new ids that stand for the recorded ones."""
    yield (
        f"resent {cassette}#{seq}: {resent.status if resent.status is not None else '-'} "
        f"{resent.outcome}, recorded as {resent.cassette}#{resent.seq}"
        + (f" in a fork of {cassette!r}" if resent.forked else "")
    )
    if not resent.differences:
        yield "the new answer is the same as the recorded one"
    for what, recorded, new in resent.differences:
        yield inert(f"  {what}: {recorded} -> {new}", newlines=False)
    if resent.ids:
        yield "new ids, each standing for the recorded one:"
    for recorded_id, new_id in resent.ids:
        yield inert(f"  {new_id} stands for {recorded_id}", newlines=False)
