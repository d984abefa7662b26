"""Bedrock's and Gemini's streams as one message to edit, written back in their own framing.

``edit --set`` changes the whole answer a stream puts together, in the shape the API gives
when not streaming, so one path means the same streamed or not: Converse's
``$.output.message.content[0].text``, Gemini's ``$.candidates[0].content.parts[0].text``,
and for Claude through InvokeModel Anthropic's ``$.content[0].text``. The edited message is
then written back as the stream it came as (as restream.py does for server-sent events):

- ConverseStream: AWS event-stream messages (``messageStart``, per block a
  ``contentBlockStart`` for a tool use, one ``contentBlockDelta`` and a
  ``contentBlockStop``, ``messageStop``, ``metadata``), framed with fresh CRCs, which
  botocore checks before it reads a byte;
- InvokeModelWithResponseStream: each chunk base64 in a ``chunk`` event, the recorded
  ``amazon-bedrock-invocationMetrics`` on the last; the chunks are the model's own: an
  Anthropic model's stream events (edited as ``$.content[0].text``), Amazon Nova's
  Converse-shaped events, one a chunk (``{"contentBlockDelta": {"delta": {"text": …}}}``;
  edited as ``$.output.message.content[0].text``, as its InvokeModel answer gives it), or
  Meta Llama's ``{"generation": …, "prompt_token_count": …, "generation_token_count": …,
  "stop_reason": …}`` (edited as ``$.generation``), written back as one chunk with the whole
  text and a last one with the counts and stop reason;
- Gemini's streamGenerateContent: one whole GenerateContentResponse per part, the last with
  the finish reason, as server-sent events or as one JSON array, as it was recorded.

Bedrock's random ``p`` padding is not written back: it carries nothing, and boto3 ignores it.
Every other stream goes to restream.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from freezeframe.canonicalize import eventstream, sse_events
from freezeframe.providers import bedrock_converse, bedrock_invoke, gemini
from freezeframe.providers.streams import Stream
from freezeframe.storage import boundedjson
from freezeframe.whatif.restream import NotRestreamable, Restream, messages_events, restream


def reframe(api: str, body: bytes) -> Restream:
    """The recorded stream ``body`` of ``api``, read for an edit. Raises NotRestreamable."""
    if api == bedrock_converse.API:
        return _converse(_bedrock_events(body))
    if api == bedrock_invoke.API:
        return _invoke(_bedrock_events(body))
    if api == gemini.API:
        return _gemini(body)
    return restream(api, body)


def _bedrock_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event type, payload) of each message; an exception or damage refuses the edit."""
    decoded = eventstream.decode(body)
    if decoded.damage is not None:
        raise NotRestreamable(f"the Bedrock event stream is {decoded.damage}")
    events = []
    for message in decoded.messages:
        if message.is_exception:
            raise NotRestreamable(f"the Bedrock stream carries a {message.event_type}")
        try:
            payload = boundedjson.loads(message.payload)
        except ValueError:
            raise NotRestreamable(f"a {message.event_type} event is not JSON") from None
        if isinstance(payload, dict):
            payload.pop(eventstream.PADDING, None)
            events.append((message.event_type, payload))
    return events


def _fed(stream: Stream, events: list[dict[str, Any]], kind: str) -> Stream:
    for event in events:
        stream.feed(event)
    if stream.error is not None:
        raise NotRestreamable(f"the {kind} stream carries an error ({stream.error})")
    if not stream.ended:
        raise NotRestreamable(f"the {kind} stream ended without {stream.end_marker}")
    return stream


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return eventstream.event(kind, text.encode())


# -- Converse (botocore's ConverseStreamOutput) --


Event = tuple[str, dict[str, Any]]


def _converse(events: list[Event]) -> Restream:
    answer, events_of = _converse_events(events, "ConverseStream")

    def encode(edited: dict[str, Any]) -> list[bytes]:
        return [_event(kind, payload) for kind, payload in events_of(edited)]

    return Restream(bedrock_converse.API, answer, encode)


def _converse_events(
    events: list[Event], kind: str
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], list[Event]]]:
    """Converse's stream events (ConverseStream's, or Nova's InvokeModel chunks) read as one
    Converse answer, and the events that write an edited answer back."""
    stream = _fed(bedrock_converse.ConverseStream(), [{k: v} for k, v in events], kind)
    answer: dict[str, Any] = json.loads(json.dumps(stream.whole(), default=str))
    for block in answer["output"]["message"]["content"]:
        if "toolUse" in block:
            use = block["toolUse"]
            use["input"] = _object(use.get("input"))
    stop = next((payload for name, payload in events if name == "messageStop"), {})
    metadata = next((payload for name, payload in events if name == "metadata"), None)

    def events_of(edited: dict[str, Any]) -> list[Event]:
        said = _dict(_dict(edited.get("output")).get("message"))
        out: list[Event] = [("messageStart", {"role": said.get("role", "assistant")})]
        for index, block in enumerate(_list(said.get("content"))):
            out += _converse_block(index, _dict(block))
        out.append(("messageStop", {**stop, "stopReason": edited.get("stopReason")}))
        if metadata is not None:
            kept = {n: v for n, v in metadata.items() if n not in ("usage", "metrics")}
            out.append(
                ("metadata", kept | {n: edited[n] for n in ("usage", "metrics") if n in edited})
            )
        return out

    return answer, events_of


def _converse_block(index: int, block: dict[str, Any]) -> list[Event]:
    at = {"contentBlockIndex": index}
    out: list[Event] = []
    use = _dict(block.get("toolUse"))
    reasoning = _dict(_dict(block.get("reasoningContent")).get("reasoningText"))
    if use:
        start = {"toolUse": {"toolUseId": use.get("toolUseId"), "name": use.get("name")}}
        out.append(("contentBlockStart", {**at, "start": start}))
        arguments = json.dumps(use.get("input", {}), ensure_ascii=False)
        out.append(("contentBlockDelta", {**at, "delta": {"toolUse": {"input": arguments}}}))
    elif reasoning:
        for name in ("text", "signature"):
            if isinstance(reasoning.get(name), str):
                delta = {"reasoningContent": {name: reasoning[name]}}
                out.append(("contentBlockDelta", {**at, "delta": delta}))
    elif isinstance(block.get("text"), str):
        out.append(("contentBlockDelta", {**at, "delta": {"text": block["text"]}}))
    else:
        raise NotRestreamable(f"a {next(iter(block), 'empty')} block cannot be streamed again")
    out.append(("contentBlockStop", at))
    return out


# -- InvokeModelWithResponseStream --


def _invoke(events: list[tuple[str, dict[str, Any]]]) -> Restream:
    chunks: list[dict[str, Any]] = []
    for kind, payload in events:
        data = payload.get("bytes")
        if kind != "chunk" or not isinstance(data, str):
            raise NotRestreamable(f"the InvokeModel stream carries a {kind} event")
        try:
            chunk = boundedjson.loads(base64.b64decode(data, validate=True))
        except ValueError:
            raise NotRestreamable("a chunk of the InvokeModel stream is not JSON") from None
        if not isinstance(chunk, dict):
            raise NotRestreamable("a chunk of the InvokeModel stream is not a JSON object")
        chunks.append(chunk)
    metrics = next((c[bedrock_invoke.METRICS] for c in chunks if bedrock_invoke.METRICS in c), None)
    bare = [{k: v for k, v in c.items() if k != bedrock_invoke.METRICS} for c in chunks]
    first = bare[0] if bare else {}
    answer: dict[str, Any]
    chunks_of: Callable[[dict[str, Any]], list[dict[str, Any]]]
    if isinstance(first.get("type"), str):  # Anthropic's stream events
        inner = [(str(c.get("type")), c) for c in bare]
        stream = _fed(bedrock_invoke.InvokeStream(), bare, "InvokeModel")
        answer, chunks_of = messages_events(inner, bedrock_invoke_inner(stream))
    elif any(name in first for name in bedrock_invoke.CONVERSE_EVENTS):  # Amazon Nova
        events = [_converse_chunk(c) for c in bare]
        answer, events_of = _converse_events(events, "InvokeModel")

        def chunks_of(edited: dict[str, Any]) -> list[dict[str, Any]]:
            return [{kind: payload} for kind, payload in events_of(edited)]

    elif isinstance(first.get("generation"), str):  # Meta Llama
        answer, chunks_of = _generation(bare)
    else:
        raise NotRestreamable(
            "only the InvokeModel streams of Anthropic, Amazon Nova and Meta Llama models can "
            "be re-encoded; replace the whole body with --response-body"
        )

    def encode(edited: dict[str, Any]) -> list[bytes]:
        out = chunks_of(edited)
        if metrics is not None and out:
            out[-1] = {**out[-1], bedrock_invoke.METRICS: metrics}
        return [_chunk(event) for event in out]

    return Restream(bedrock_invoke.API, answer, encode)


def _converse_chunk(chunk: dict[str, Any]) -> Event:
    """A Nova chunk (``{"contentBlockDelta": {...}}``) as Converse's (type, payload)."""
    if len(chunk) != 1 or not isinstance(next(iter(chunk.values())), dict):
        raise NotRestreamable(f"an Amazon Nova chunk holds {sorted(chunk)}, not one event")
    kind, payload = next(iter(chunk.items()))
    return kind, payload


def _generation(
    chunks: list[dict[str, Any]],
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], list[dict[str, Any]]]]:
    """Meta Llama's chunks (``generation``, ``prompt_token_count``, ``generation_token_count``,
    ``stop_reason``) as its whole answer, and the chunks that write an edited one back: one
    with the whole text, then the recorded last chunk's counts and stop reason."""
    texts = [c.get("generation") for c in chunks]
    if not all(isinstance(text, str) for text in texts):
        raise NotRestreamable("a chunk of the Meta Llama stream has no generation text")
    last = chunks[-1]
    if last.get("stop_reason") is None:
        raise NotRestreamable("the Meta Llama stream ended without a stop_reason")
    answer: dict[str, Any] = {"generation": "".join(str(text) for text in texts)}
    for name in ("prompt_token_count", "generation_token_count", "stop_reason"):
        answer[name] = next((c[name] for c in reversed(chunks) if c.get(name) is not None), None)

    def chunks_of(edited: dict[str, Any]) -> list[dict[str, Any]]:
        said = edited.get("generation")
        if not isinstance(said, str):
            raise NotRestreamable("$.generation of a Meta Llama answer must be a string")
        prompt = edited.get("prompt_token_count")
        opening = {**chunks[0], "generation": said, "prompt_token_count": prompt}
        opening["stop_reason"] = None
        counts = {n: edited.get(n) for n in ("generation_token_count", "stop_reason")}
        return [opening, {**last, "generation": "", "prompt_token_count": None, **counts}]

    return answer, chunks_of


def bedrock_invoke_inner(stream: Stream) -> Stream:
    inner = stream.inner if isinstance(stream, bedrock_invoke.InvokeStream) else None
    if inner is None:
        raise NotRestreamable("the InvokeModel stream's model is not known")
    return inner


def _chunk(event: dict[str, Any]) -> bytes:
    data = base64.b64encode(json.dumps(event, ensure_ascii=False).encode()).decode()
    return _event("chunk", {"bytes": data})


# -- Gemini's streamGenerateContent --


def _gemini(body: bytes) -> Restream:
    arrayed = body.lstrip().startswith(b"[")
    try:
        if arrayed:
            answers = boundedjson.loads(body)
        else:
            answers = [boundedjson.loads(data) for _, data in sse_events(body)]
    except ValueError:
        raise NotRestreamable("a part of the Gemini stream is not JSON") from None
    answers = [item for item in _list(answers) if isinstance(item, dict)]
    if any(len(_list(item.get("candidates"))) > 1 for item in answers):
        raise NotRestreamable("the Gemini stream has several candidates")
    stream = _fed(gemini.GeminiStream(), answers, "Gemini")
    answer: dict[str, Any] = json.loads(json.dumps(stream.whole(), default=str))
    frame: Callable[[int, int, dict[str, Any]], bytes] = _array_item if arrayed else _sse_item

    def encode(edited: dict[str, Any]) -> list[bytes]:
        first = _dict(_list(edited.get("candidates"))[0]) if _list(edited.get("candidates")) else {}
        content = _dict(first.get("content"))
        parts = _list(content.get("parts")) or [{"text": ""}]
        rest = {n: v for n, v in edited.items() if n != "candidates"}
        out = []
        for at, part in enumerate(parts):
            candidate: dict[str, Any] = {
                **{n: v for n, v in first.items() if n not in ("content", "finishReason")},
                "content": {**content, "parts": [part]},
            }
            if at == len(parts) - 1 and "finishReason" in first:
                candidate["finishReason"] = first["finishReason"]
            out.append(frame(at, len(parts), {"candidates": [candidate], **rest}))
        return out

    return Restream(gemini.API, answer, encode)


def _sse_item(at: int, count: int, item: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(item, ensure_ascii=False).encode() + b"\r\n\r\n"


def _array_item(at: int, count: int, item: dict[str, Any]) -> bytes:
    text = json.dumps(item, ensure_ascii=False).encode()
    return (b"[" if at == 0 else b",\r\n") + text + (b"]" if at == count - 1 else b"")


def _object(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value else {}
        except ValueError:
            raise NotRestreamable(f"a toolUse input is not JSON: {value[:60]!r}") from None
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
