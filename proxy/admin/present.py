"""What the case file's pages draw from the read model: waterfall bars, the stream chart,
body previews. Functions of listings and documents (and, for a preview, the start of a
stored body), so the pages show what the JSON twins say, only laid out for people.

Bodies are untrusted and may be huge: a preview reads at most ``PREVIEW_BYTES`` of a body
(the first part of one kept in the store, never the whole), and shows it as text when it is
UTF-8 (JSON indented, an AWS event stream as its decoded events), else as a hex dump.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from freezeframe.canonicalize import eventstream
from freezeframe.storage import (
    BlobRef,
    Exchange,
    ExchangeSummary,
    Header,
    ReadStore,
    RecordedResponse,
    boundedjson,
)
from freezeframe.storage.encodings import decode_body

PREVIEW_BYTES = 64 * 1024
"""How much of a body a page shows; the rest is a download."""
HEX_BYTES = 4 * 1024
"""How much of a binary body is shown as a hex dump."""
CHART_MARKS = 2_000
"""Chunks drawn one mark each up to this many; more are drawn in this many bins."""
WIDTH = 1000.0
"""The width of every chart's viewBox."""

_INPUT_TOKENS = ("prompt_tokens", "input_tokens")
_OUTPUT_TOKENS = ("completion_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class Bar:
    """An exchange's place on the run's timeline, in viewBox units: waiting for the first
    byte from ``start`` to ``first``, receiving from ``first`` to ``end``."""

    start: float
    first: float
    end: float


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the waterfall."""

    summary: ExchangeSummary
    host: str
    target: str
    """Path and query."""
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    bar: Bar


def waterfall(summaries: Sequence[ExchangeSummary], span: tuple[float, float]) -> list[Row]:
    """The rows of a waterfall whose timeline runs from ``span[0]`` to ``span[1]`` (epoch
    seconds; the whole run's, so a page of a long run keeps the run's scale)."""
    begin, end = span
    scale = WIDTH / max(end - begin, 1e-6)
    rows = []
    for summary in summaries:
        parts = urlsplit(summary.url)
        start = (summary.started_at - begin) * scale
        duration = summary.duration or 0.0
        first = summary.first_byte_after if summary.first_byte_after is not None else duration
        usage = summary.facts.get("usage")
        counts = usage if isinstance(usage, Mapping) else {}
        model = summary.facts.get("answered_model") or summary.facts.get("model")
        rows.append(
            Row(
                summary=summary,
                host=parts.netloc,
                target=parts.path + (f"?{parts.query}" if parts.query else ""),
                model=model if isinstance(model, str) else None,
                tokens_in=_first_of(counts, _INPUT_TOKENS),
                tokens_out=_first_of(counts, _OUTPUT_TOKENS),
                bar=Bar(
                    start=round(start, 2),
                    first=round(start + min(first, duration) * scale, 2),
                    end=round(start + max(duration * scale, 1.0), 2),
                ),
            )
        )
    return rows


def _first_of(counts: Mapping[str, int | str], names: Sequence[str]) -> int | None:
    """The first of ``names`` that ``counts`` holds a number for: usage is a fact of counts
    (storage.FACT_KINDS), though a fact's type allows a map of labels too."""
    for name in names:
        value = counts.get(name)
        if isinstance(value, int):
            return value
    return None


@dataclass(frozen=True, slots=True)
class Mark:
    """One mark of the stream chart: a chunk (or a bin of them) at ``x``, ``height`` by its
    share of the largest, with a tooltip."""

    x: float
    height: float
    title: str


@dataclass(frozen=True, slots=True)
class StreamChart:
    chunks: int
    marks: tuple[Mark, ...]
    first_byte: float | None
    """x of the first byte."""
    end: float
    """x of the last chunk: where a truncated body was cut off."""
    seconds: float
    gaps: tuple[str, ...]
    """The longest pauses between chunks, for people."""


def stream_chart(chunks: Sequence[Sequence[float]], total: int) -> StreamChart | None:
    """The chart of a response's chunk arrivals (``[offset, at]`` pairs, ``total`` bytes);
    None when it has no chunks."""
    if not chunks:
        return None
    times = [float(at) for _, at in chunks]
    sizes = [
        int(next_offset) - int(offset)
        for (offset, _), (next_offset, _) in zip(chunks, [*chunks[1:], (total, 0.0)], strict=True)
    ]
    last = max(times[-1], 1e-6)
    scale = WIDTH / last
    if len(chunks) <= CHART_MARKS:
        biggest = max(max(sizes), 1)
        marks = tuple(
            Mark(
                x=round(at * scale, 2),
                height=round(max(size / biggest, 0.05) * 40, 2),
                title=f"chunk {n + 1}: {size} bytes at {at * 1000:.1f} ms",
            )
            for n, (at, size) in enumerate(zip(times, sizes, strict=True))
        )
    else:
        marks = _binned(times, sizes, scale)
    pauses = sorted(
        ((b - a, n) for n, (a, b) in enumerate(zip(times, times[1:], strict=False))),
        reverse=True,
    )[:3]
    return StreamChart(
        chunks=len(chunks),
        marks=marks,
        first_byte=round(times[0] * scale, 2),
        end=round(times[-1] * scale, 2),
        seconds=times[-1],
        gaps=tuple(f"{gap * 1000:.0f} ms after chunk {n + 1}" for gap, n in pauses if gap > 0),
    )


def _binned(times: Sequence[float], sizes: Sequence[int], scale: float) -> tuple[Mark, ...]:
    bins: dict[int, tuple[int, int]] = {}
    for at, size in zip(times, sizes, strict=True):
        slot = min(int(at * scale / WIDTH * CHART_MARKS), CHART_MARKS - 1)
        count, total = bins.get(slot, (0, 0))
        bins[slot] = (count + 1, total + size)
    biggest = max(total for _, total in bins.values()) or 1
    return tuple(
        Mark(
            x=round(slot * WIDTH / CHART_MARKS, 2),
            height=round(max(total / biggest, 0.05) * 40, 2),
            title=f"{count} chunks, {total} bytes",
        )
        for slot, (count, total) in sorted(bins.items())
    )


@dataclass(frozen=True, slots=True)
class Preview:
    """The start of a body, for a page."""

    size: int
    text: str | None
    """The body as text when it is UTF-8 (cut at PREVIEW_BYTES)."""
    hex: str | None
    """Otherwise a hex dump of its first HEX_BYTES."""
    cut: bool
    """Only the start is shown: download the rest."""


def preview(
    store: ReadStore, data: bytes, ref: BlobRef | None, headers: Sequence[Header] = ()
) -> Preview | None:
    """The start of a body held in memory (``data``) or in the store (``ref``): at most
    PREVIEW_BYTES read, whatever its size. None for an empty body. A JSON body held in
    memory is shown decoded and indented, as ``show`` prints it."""
    size = ref.size if ref is not None else len(data)
    if size == 0:
        return None
    kind = content_type(headers)
    if ref is None and "json" in kind.lower():
        pretty = _pretty_json(data, headers)
        if pretty is not None and len(pretty) <= PREVIEW_BYTES:
            return Preview(size, pretty, None, False)
    if ref is None and eventstream.is_event_stream(kind):
        events = _event_lines(data, headers)
        if events is not None and len(events) <= PREVIEW_BYTES:
            return Preview(size, events, None, False)
    head = _head(store.read_blob(ref)) if ref is not None else data[:PREVIEW_BYTES]
    cut = size > len(head)
    text = _utf8_prefix(head, cut)
    if text is not None:
        return Preview(size, text, None, cut)
    return Preview(size, None, hexdump(head[:HEX_BYTES]), True if size > HEX_BYTES else cut)


def _pretty_json(data: bytes, headers: Sequence[Header]) -> str | None:
    decoded = decode_body(data, headers)
    if not decoded.whole:
        return None
    try:
        return json.dumps(boundedjson.loads(decoded.data), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def _event_lines(data: bytes, headers: Sequence[Header]) -> str | None:
    """An AWS event stream (Bedrock's) as ``show`` prints it, not as a hex dump of its
    binary frames: one event a line, its padding left out, what stopped the reading last."""
    decoded = decode_body(data, headers)
    if not decoded.whole:
        return None
    events, damage = eventstream.json_events(decoded.data)
    if not events:
        return None
    lines = [json.dumps(event, ensure_ascii=False) for event in events]
    return "\n".join(lines + ([f"({damage})"] if damage else []))


_NORMAL_CLOSE = re.compile(r"closed by (?:client|server): 100[01](?: .*)?", re.DOTALL)
"""How a WebSocket that ended as sessions end is recorded in ``error`` (addons.websocket's
``Close``): code 1000, a normal closure, or 1001, going away."""


def closed_normally(exchange: Exchange) -> bool:
    """Whether this is a WebSocket whose close was the ordinary end of its session: a fact
    to state, not a problem to show in red."""
    return exchange.recorded.messages is not None and bool(
        _NORMAL_CLOSE.fullmatch(exchange.recorded.error or "")
    )


def content_type(headers: Sequence[Header]) -> str:
    """The Content-Type header's value, or ""."""
    return next((v.decode("latin-1") for n, v in headers if n.lower() == b"content-type"), "")


def streamed(response: RecordedResponse, kind: str) -> bool:
    """Whether an answer came as a stream worth charting: server-sent events, or a body in
    more than one chunk. A whole JSON answer is one chunk, and "Stream: 1 chunk" says nothing."""
    return "event-stream" in kind.lower() or len(response.chunks) > 1


def shown_facts(facts: Mapping[str, object]) -> dict[str, object]:
    """The metadata worth a line on the page: no empty values, and no ``api`` for a request
    no provider profile read (``generic.empty`` names how a body was read, not a provider)."""
    return {
        name: value
        for name, value in facts.items()
        if value not in (None, "", {}, [])
        and not (name == "api" and str(value).startswith("generic."))
    }


_KNOWN_TEXT_PATHS = (
    "$.choices[0].message.content",
    "$.content[0].text",
    "$.output[0].content[0].text",
    "$.result.content[0].text",
)


def example_path(exchange: Exchange) -> str:
    """A ``--set`` line valid for this answer, for the edit form's example: the model's text
    where the answer has one, else its first string member, else its first member."""
    fallback = '$.answer="new value"'
    response = exchange.recorded.response
    if response is None or response.body_ref is not None:
        return fallback
    decoded = decode_body(response.body, response.headers)
    try:
        value = boundedjson.loads(decoded.data)
    except ValueError:
        return fallback
    for path in _KNOWN_TEXT_PATHS:
        if _at(value, path) is not _MISSING:
            return f'{path}="new text"'
    if isinstance(value, dict):
        named = [(name, member) for name, member in value.items() if name.isidentifier()]
        for name, member in sorted(named, key=lambda item: not isinstance(item[1], str)):
            shown = json.dumps(member, ensure_ascii=False)
            return f"$.{name}={shown if len(shown) <= 40 else '"new value"'}"
    return fallback


_MISSING = object()


def _at(value: Any, path: str) -> Any:
    """The value at a simple ``$.a[0].b`` path (null is a value), or _MISSING."""
    for step in path.removeprefix("$.").replace("[", ".").replace("]", "").split("."):
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
    return value


FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    b'<rect width="16" height="16" rx="3" fill="#24527a"/>'
    b'<rect x="4" y="3" width="3" height="10" fill="#fff"/>'
    b'<rect x="9" y="3" width="3" height="10" fill="#fff"/></svg>'
)
"""The case file's icon: a pause sign, as a frozen frame."""


def _head(parts: Iterator[bytes]) -> bytes:
    """The first PREVIEW_BYTES of a stored body; stops reading there."""
    head = bytearray()
    try:
        for part in parts:
            head += part
            if len(head) >= PREVIEW_BYTES:
                break
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            close()
    return bytes(head[:PREVIEW_BYTES])


def _utf8_prefix(head: bytes, cut: bool) -> str | None:
    """``head`` as text, allowing a character split by the cut at its end."""
    for trim in range(4 if cut else 1):
        try:
            return head[: len(head) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex, printable ASCII."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {row.hex(' '):<47}  {shown}")
    return "\n".join(lines)
