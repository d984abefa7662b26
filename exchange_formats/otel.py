"""OpenTelemetry traces of a cassette, as OTLP JSON: one ExportTraceServiceRequest a line.

Each model call becomes a ``chat`` span following the GenAI semantic conventions (v1.37):
``gen_ai.operation.name``, ``gen_ai.provider.name``, request and response model, response id,
usage, finish reasons, and ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON
text; each tool call it asked for becomes an ``execute_tool`` span beneath it, lasting until
the request that carried the tool's result back (or no time at all when none did): by the
call's id, or, where the API gives none (Gemini), by name in order among the results after
the history's last model message, as the API pairs them. Any other
exchange is an HTTP client span. Where the agent sent a W3C ``traceparent``, its spans join
that trace under the agent's span; otherwise a run's spans share a trace derived from its
run id. Ids are hex strings, as OTLP/JSON requires (its one exception to the protobuf JSON
mapping). freezeframe's own fields are ``freezeframe.*`` attributes: cassette, seq, chain
link, outcome.

With ``--otlp-endpoint`` the same requests are POSTed to a collector over OTLP/HTTP instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import IO, Any

import blake3

from freezeframe.evidence import Conversation, conversations_of
from freezeframe.exchange_formats.jsonl import Progress
from freezeframe.exchange_formats.reading import Current, each_exchange
from freezeframe.providers.messages import Message, ToolCall
from freezeframe.storage import Exchange, Outcome, ReadStore

_CLIENT = 3
"""SpanKind CLIENT."""
_INTERNAL = 1
_ERROR = 2
"""StatusCode ERROR."""

_FINISH = {
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "completed": "stop",
    "STOP": "stop",
    "MAX_TOKENS": "length",
}
"""Providers' finish reasons in the conventions' words for an output message (the span's
``gen_ai.response.finish_reasons`` keeps the provider's own)."""

_SYSTEM = {"azure.ai.openai": "az.ai.openai"}
"""``gen_ai.system`` (deprecated by ``gen_ai.provider.name``, which collectors still read):
the same names but Azure's, which it spelled ``az.ai.openai``."""

_INPUT_TOKENS = (
    "prompt_tokens",
    "input_tokens",
    "inputTokens",
    "promptTokenCount",
    "prompt_token_count",
)
_OUTPUT_TOKENS = (
    "completion_tokens",
    "output_tokens",
    "outputTokens",
    "candidatesTokenCount",
    "generation_token_count",
)
"""Usage counts by each API's name for them: OpenAI Chat, Anthropic and Responses, Bedrock
Converse (and Amazon Nova), Gemini, Meta Llama on Bedrock."""

Send = Callable[[bytes], None]
"""Takes one ExportTraceServiceRequest as JSON."""


def export_otel(store: ReadStore, cassette: str, send: Send, progress: Progress) -> int:
    """Hand ``send`` one OTLP request per exchange, in recorded order; returns the spans."""
    spans = 0
    pending: dict[str, dict[str, Any]] = {}
    """Tool spans waiting for the request that brings their result back, by call id."""
    exchanges = Current(each_exchange(store, cassette, progress))
    for conversation in conversations_of(exchanges):
        exchange = exchanges.current
        assert exchange is not None
        batch = _spans(cassette, exchange, conversation, pending)
        spans += len(batch)
        send(_request(batch))
    if pending:
        send(_request(list(pending.values())))
        spans += len(pending)
    return spans


def write_lines(out: IO[bytes]) -> Send:
    """Each request as one line of ``out`` (OTLP JSON Lines)."""

    def send(line: bytes) -> None:
        out.write(line + b"\n")

    return send


@contextmanager
def post_to(endpoint: str) -> Iterator[Send]:
    """Each request POSTed to a collector's OTLP/HTTP traces endpoint (``/v1/traces`` is
    added to a URL that does not end with it); a refusal raises ValueError naming it."""
    url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    import httpx  # only to send: writing spans to a file needs no HTTP client

    with httpx.Client(timeout=30) as client:

        def send(line: bytes) -> None:
            try:
                answer = client.post(
                    url, content=line, headers={"content-type": "application/json"}
                )
            except httpx.HTTPError as exc:
                raise ValueError(f"{url}: cannot send spans: {exc}") from None
            if answer.status_code >= 300:
                raise ValueError(f"{url}: the collector answered {answer.status_code}")

        yield send


def _request(spans: list[dict[str, Any]]) -> bytes:
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attribute("service.name", "freezeframe")]},
                "scopeSpans": [
                    {
                        "scope": {"name": "freezeframe", "version": version("freezeframe")},
                        "spans": spans,
                    }
                ],
            }
        ]
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _spans(
    cassette: str,
    exchange: Exchange,
    conversation: Conversation | None,
    pending: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    trace_id, parent = _trace(cassette, exchange)
    span_id = _id(f"{cassette}\0{exchange.seq}", 8)
    start = _nanos(exchange.recorded.started_at)
    end = _nanos(exchange.recorded.started_at + (exchange.recorded.duration or 0.0))
    spans = []
    if conversation is not None:
        messages = conversation.messages
        latest = max((n for n, m in enumerate(messages) if m.role == "assistant"), default=-1)
        for number, message in enumerate(messages):
            for result in message.tool_results:
                key = result.call_id or ""
                if not key and number > latest:  # older results answered older calls
                    key = _oldest_by_name(pending, result.name or "")
                tool = pending.pop(key, None)
                if tool is not None:
                    tool["endTimeUnixNano"] = str(max(start, int(tool["startTimeUnixNano"])))
                    spans.append(tool)
    attributes = [
        _attribute("server.address", exchange.recorded.host),
        _attribute("server.port", exchange.recorded.port),
        _attribute("http.request.method", exchange.recorded.method),
        _attribute("url.full", exchange.url),
        _attribute("freezeframe.cassette", cassette),
        _attribute("freezeframe.seq", exchange.seq),
        _attribute("freezeframe.chain", exchange.chain),
        _attribute("freezeframe.outcome", exchange.recorded.outcome.value),
    ]
    if exchange.recorded.response is not None:
        attributes.append(
            _attribute("http.response.status_code", exchange.recorded.response.status)
        )
    for name, value in exchange.recorded.context.items():
        attributes.append(_attribute(f"freezeframe.context.{name}", value))
    name = exchange.recorded.method
    if conversation is not None:
        name = f"chat {conversation.model}" if conversation.model else "chat"
        attributes += _gen_ai(conversation)
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": _CLIENT,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": attributes,
        "status": _status(exchange),
    }
    if parent:
        span["parentSpanId"] = parent
    spans.append(span)
    answer = conversation.answer if conversation is not None else None
    for index, call in enumerate(answer.tool_calls if answer is not None else ()):
        tool = _tool_span(trace_id, span_id, f"{cassette}\0{exchange.seq}\0{index}", call, end)
        pending[call.id or f"{_NO_ID}{exchange.seq}:{index}"] = tool
    return spans


_NO_ID = "\0"
"""Starts the key of a pending call that came without an id (no id starts so)."""


def _oldest_by_name(pending: dict[str, dict[str, Any]], name: str) -> str:
    """The key of the oldest pending call without an id named ``name``: results that carry no
    id answer such calls in the order they were asked."""
    for key, tool in pending.items():
        if key.startswith(_NO_ID) and tool["name"] == f"execute_tool {name}":
            return key
    return ""


def _trace(cassette: str, exchange: Exchange) -> tuple[str, str | None]:
    """The agent's trace and span where it sent a traceparent; else a trace per run."""
    trace_id, parent = (
        exchange.recorded.facts.get("trace_id"),
        exchange.recorded.facts.get("parent_span_id"),
    )
    if isinstance(trace_id, str) and len(trace_id) == 32:
        return trace_id, parent if isinstance(parent, str) and len(parent) == 16 else None
    run = exchange.recorded.context.get("run-id", "")
    return _id(f"{cassette}\0{run}", 16), None


def _gen_ai(c: Conversation) -> list[dict[str, Any]]:
    operation = "chat"
    attributes = [
        _attribute("gen_ai.operation.name", operation),
        _attribute("gen_ai.provider.name", c.provider),
        _attribute("gen_ai.system", _SYSTEM.get(c.provider, c.provider)),
        _attribute("gen_ai.input.messages", json.dumps(_input_messages(c), ensure_ascii=False)),
    ]
    if c.model:
        attributes.append(_attribute("gen_ai.request.model", c.model))
    answer = c.answer
    if answer is None:
        return attributes
    if answer.model:
        attributes.append(_attribute("gen_ai.response.model", answer.model))
    if answer.response_id:
        attributes.append(_attribute("gen_ai.response.id", answer.response_id))
    if answer.finish_reason:
        attributes.append(_attribute("gen_ai.response.finish_reasons", [answer.finish_reason]))
    usage = answer.usage
    input_tokens = next((usage[n] for n in _INPUT_TOKENS if n in usage), None)
    output_tokens = next((usage[n] for n in _OUTPUT_TOKENS if n in usage), None)
    if input_tokens is not None:
        attributes.append(_attribute("gen_ai.usage.input_tokens", input_tokens))
    if output_tokens is not None:
        attributes.append(_attribute("gen_ai.usage.output_tokens", output_tokens))
    output = {
        "role": "assistant",
        "parts": _parts(answer.text, answer.tool_calls),
        "finish_reason": _FINISH.get(answer.finish_reason or "", answer.finish_reason or ""),
    }
    attributes.append(
        _attribute("gen_ai.output.messages", json.dumps([output], ensure_ascii=False))
    )
    return attributes


def _input_messages(c: Conversation) -> list[dict[str, Any]]:
    """The messages in the conventions' shape: role and parts (text, tool_call,
    tool_call_response)."""
    messages = []
    if c.system and not any(m.role in ("system", "developer") for m in c.messages):
        messages.append({"role": "system", "parts": [{"type": "text", "content": c.system}]})
    for message in c.messages:
        messages.append({"role": _role(message), "parts": _message_parts(message)})
    return messages


def _role(message: Message) -> str:
    return "tool" if message.tool_results and not message.text else message.role


def _message_parts(message: Message) -> list[dict[str, Any]]:
    parts = _parts(message.text, message.tool_calls)
    for result in message.tool_results:
        parts.append({"type": "tool_call_response", "id": result.call_id, "response": result.text})
    return parts


def _parts(text: str, calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    for call in calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return parts


def _tool_span(trace_id: str, parent: str, seed: str, call: ToolCall, start: int) -> dict[str, Any]:
    attributes = [
        _attribute("gen_ai.operation.name", "execute_tool"),
        _attribute("gen_ai.tool.name", call.name),
        _attribute("gen_ai.tool.type", "function"),
        _attribute("gen_ai.tool.call.arguments", call.arguments),
    ]
    if call.id:
        attributes.append(_attribute("gen_ai.tool.call.id", call.id))
    return {
        "traceId": trace_id,
        "spanId": _id(seed, 8),
        "parentSpanId": parent,
        "name": f"execute_tool {call.name}",
        "kind": _INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start),
        "attributes": attributes,
        "status": {},
    }


def _status(exchange: Exchange) -> dict[str, Any]:
    response = exchange.recorded.response
    if exchange.recorded.outcome in (Outcome.FAILED, Outcome.TRUNCATED, Outcome.INCOMPLETE):
        return {
            "code": _ERROR,
            "message": exchange.recorded.error or exchange.recorded.outcome.value,
        }
    if response is not None and response.status >= 400:
        return {"code": _ERROR, "message": f"HTTP {response.status}"}
    return {}


def _attribute(key: str, value: str | int | list[str]) -> dict[str, Any]:
    if isinstance(value, list):
        values = [{"stringValue": item} for item in value]
        return {"key": key, "value": {"arrayValue": {"values": values}}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _id(seed: str, size: int) -> str:
    """A stable id of ``size`` bytes, as hex: the same cassette exports the same ids."""
    return blake3.blake3(seed.encode("utf-8")).digest(length=size).hex()


def _nanos(seconds: float) -> int:
    return int(round(seconds * 1_000_000_000))
