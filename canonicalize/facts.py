"""The replay-kit facts of one exchange: which API and model it used, how, and what it cost.

`facts_of` reads them from the request and the answer so `ls` and `show` can filter and
display them without opening blobs. They are derived data, never part of a key: the same
profile matching `canonicalize` uses names the API, so the two cannot disagree about it.

Every field is read only where its provider documents it; each list below says where it came
from. The answer's body is read by its shape (an Anthropic event, a Responses object, a chat
chunk) rather than by the profile, so a truncated or error answer still gives whatever it
holds, and a server copying one of these APIs on a path no profile knows is read alike,
provided its request names a `model`. Nothing here raises, whatever the bytes.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from . import eventstream
from .body import read_body
from .jsonbody import JsonValue, NotJson, read_json
from .model import RequestView
from .profiles import select_profile
from .profiles.bedrock import bedrock_call
from .profiles.gemini import gemini_call
from .profiles.mcp import is_stream_request
from .providers import MODEL_PROVIDERS, azure_deployment, provider_of

type FactValue = str | int | float | bool | None | dict[str, int] | dict[str, str]

FACT_NAMES: tuple[str, ...] = (
    "provider",
    "api",
    "model",
    "answered_model",
    "temperature",
    "top_p",
    "seed",
    "max_tokens",
    "stream",
    "system_fingerprint",
    "response_id",
    "request_id",
    "usage",
    "finish_reason",
    "rate_limits",
    "trace_id",
    "parent_span_id",
)
"""Every name `facts_of` may return, the one list of them: the store keeps a column for each,
of the kind storage.records.FACT_KINDS gives it (the two packages may not import each other,
so tests/evidence/test_fact_names.py fails when they disagree)."""

FACTS_BODY_LIMIT = 8 * 1024 * 1024
"""Answer bodies longer than this are not read (callers may pass None instead of decoding
them): reading runs on the proxy's event loop, and a long stream's facts sit at its ends."""

_STREAMING_APIS = frozenset(
    {
        "openai.chat-completions",
        "openai.responses",
        "openai.completions",
        "anthropic.messages",
        "cohere.chat",
    }
)
"""APIs whose `stream` parameter is optional and false by default (per each API reference), so
a request without it asked for one whole answer, and its metadata says so."""

_BODY_NOT_READ = frozenset({"generic.empty", "generic.form", "generic.multipart", "generic.bytes"})
"""Profiles (canonicalize/profiles/generic.py) of bodies that hold no JSON to take facts from."""

# Request parameters, by the names in the SDKs' request types (.venv/lib/python3.12/
# site-packages): openai/types/chat/completion_create_params.py, openai/types/responses/
# response_create_params.py, openai/types/completion_create_params.py,
# anthropic/types/message_create_params.py, and the Messages API reference
# (https://docs.anthropic.com/en/api/messages) for temperature and top_p, which the API takes
# though this SDK's types no longer list them.
_SAMPLING = ("temperature", "top_p")
_MAX_TOKENS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
"""Chat's current name first: chat requests may carry its deprecated `max_tokens` too."""

# Request id headers: openai/_exceptions.py and openai/_base_client.py read `x-request-id`;
# anthropic/_exceptions.py and anthropic/_base_client.py read `request-id`; botocore's
# parsers.py reads `x-amzn-requestid` into ResponseMetadata.RequestId.
_REQUEST_ID_HEADERS = {
    "openai": ("x-request-id", "request-id"),
    "anthropic": ("request-id", "x-request-id"),
    "aws.bedrock": ("x-amzn-requestid", "x-amzn-request-id"),
}
_ANY_REQUEST_ID_HEADERS = ("x-request-id", "request-id")

# Rate-limit headers: OpenAI `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`
# (https://platform.openai.com/docs/guides/rate-limits), Anthropic `anthropic-ratelimit-*`
# and `retry-after` (https://docs.anthropic.com/en/api/rate-limits), `retry-after-ms` (read by
# both SDKs' _base_client.py when retrying), and the IETF draft's `RateLimit`,
# `RateLimit-Policy` and older `RateLimit-*` (draft-ietf-httpapi-ratelimit-headers).
_RATE_LIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "ratelimit-")
_RATE_LIMIT_NAMES = frozenset({"ratelimit", "retry-after", "retry-after-ms"})

# W3C Trace Context, https://www.w3.org/TR/trace-context/#traceparent-header:
# version-traceid-parentid-flags in lowercase hex. Version ff is invalid, version 00 ends
# after the flags, a later version may add fields after a dash; all-zero ids are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?", re.S)
_ZERO_TRACE_ID = "0" * 32
_ZERO_SPAN_ID = "0" * 16

_ANSWER_EVENTS = frozenset(
    {
        # anthropic/types/raw_message_stream_event.py: message_start carries the Message
        # (id, model, input usage), message_delta the stop_reason and cumulative usage;
        # the rest (content_block_*, message_stop, ping) carry no facts.
        "message_start",
        "message_delta",
        # Both providers' stream error event (anthropic: ErrorResponse in
        # anthropic/types/shared/error_response.py; openai: responses/response_error_event.py).
        "error",
        # openai/types/responses/response_{queued,created,in_progress,completed,failed,
        # incomplete}_event.py: each carries the whole Response; the many delta events do not.
        "response.queued",
        "response.created",
        "response.in_progress",
        "response.completed",
        "response.failed",
        "response.incomplete",
        # cohere/types/chat_message_start_event.py and chat_message_end_event.py (Chat v2):
        # the answer's id, then its finish_reason and usage.
        "message-start",
        "message-end",
    }
)
"""Named SSE events worth parsing; unnamed (`message`) events are chat or completion chunks."""

_MAY_HOLD_FACTS = re.compile(
    rb'"(?:finish_reason|stop_reason|usage|status|incomplete_details|finishReason|usageMetadata)"'
    rb"\s*:\s*[^\sn]"
)
"""A chunk naming none of these with a value other than null adds nothing once the stream's
id and model are known, so the chunks between a stream's first and last are skipped unparsed."""

_CONVERSE_EVENTS = frozenset({"messageStop", "metadata"})
"""ConverseStream events that carry facts (botocore's ConverseStreamOutput): the stop reason,
and the usage and metrics."""

_BEDROCK_METRICS = "amazon-bedrock-invocationMetrics"
"""What Bedrock adds to the last chunk of every InvokeModel stream, beside the model's own."""
_LLAMA_COUNTS = ("prompt_token_count", "generation_token_count")
"""Meta Llama's usage on Bedrock (its InvokeModel answer and each chunk of its stream)."""

_INT64 = range(-(2**63), 2**63)
"""Integers outside this are no real count or seed, and SQL columns could not hold them."""


@dataclass(frozen=True, slots=True)
class ResponseView:
    """An answer as the proxy saw it, the counterpart of `RequestView`.

    `body` is content-decoded (no gzip), or None when it was too long to read or never
    arrived; `headers` keep their order and repetitions; `status` tells the answers that
    have no content whatever bytes came (1xx, 204, 304).
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    content_type: str = ""


def facts_of(
    request: RequestView, response: ResponseView | None, profile: str | None = None
) -> dict[str, FactValue]:
    """The exchange's facts, keyed by names from FACT_NAMES, with absent ones left out.

    `response` is None when no answer came. Usage is a flat map of token counts (nested
    details as `prompt_tokens_details.cached_tokens`), rate limits a map of lower-cased header
    names to values. `profile` is the name `canonicalize` gave the request
    (`Canonical.profile`), for callers that have it: a request whose profile reads no JSON
    then has its body left alone (an upload is not read again), and any other has it read
    once more, as `canonicalize` reads it, for the fields it asks with.
    """
    value: JsonValue = None
    if profile is None or profile not in _BODY_NOT_READ:
        body = read_body(request.body, request.content_type)
        if profile is None:
            profile = select_profile(request.path, body).name
        if body.kind == "json":
            value = body.value
    if profile == "generic.empty" and is_stream_request(request.method, request.headers):
        profile = "mcp"  # an MCP session's stream, opened or resumed by a GET
    provider = provider_of(profile, request.host, request.path, request.query)
    facts: dict[str, FactValue] = {"provider": provider, "api": profile}
    fields = value if isinstance(value, dict) else {}
    is_model_api = provider in MODEL_PROVIDERS or (
        provider is None and isinstance(fields.get("model"), str)
    )
    if is_model_api:
        facts.update(_request_parameters(fields))
        facts.update(_path_parameters(request.path, fields))
        if profile == "openai.realtime":  # the session's model is named in the query
            facts["model"] = next((v for k, v in request.query if k == "model"), None)
        if profile in _STREAMING_APIS:
            facts.setdefault("stream", False)
    facts.update(_trace(request.headers, value if provider == "mcp" else None))
    if response is not None:
        if is_model_api:
            facts.update(answer_facts(response))
        facts.update(_response_headers(response.headers, provider))
    return {name: fact for name in FACT_NAMES if (fact := facts.get(name)) is not None}


def _request_parameters(fields: dict[str, JsonValue]) -> dict[str, FactValue]:
    """Model, sampling, length and streaming as asked, each only when well-typed."""
    facts: dict[str, FactValue] = {}
    model = fields.get("model")
    if isinstance(model, str) and model:
        facts["model"] = model
    for name in _SAMPLING:
        value = fields.get(name)
        if isinstance(value, float) or _is_int(value):
            facts[name] = float(value)
    seed = fields.get("seed")
    if _is_int(seed):
        facts["seed"] = seed
    limits = (fields.get(name) for name in _MAX_TOKENS)
    facts["max_tokens"] = next((value for value in limits if _is_int(value)), None)
    stream = fields.get("stream")
    if isinstance(stream, bool):
        facts["stream"] = stream
    return facts


def _path_parameters(path: str, fields: dict[str, JsonValue]) -> dict[str, FactValue]:
    """What the APIs that name the model in the path say there: Bedrock's model id and
    operation (botocore's bedrock-runtime service model), Gemini's model and method
    (google-genai's models.py), Azure's deployment; and their nested sampling parameters:
    Converse's `inferenceConfig` (maxTokens, temperature, topP) and Gemini's
    `generationConfig` (temperature, topP, maxOutputTokens, seed)."""
    facts: dict[str, FactValue] = {}
    config: JsonValue = None
    names = ("temperature", "topP", "maxTokens", "seed")
    bedrock = bedrock_call(path)
    gemini = gemini_call(path)
    if bedrock is not None:
        facts["model"], facts["stream"] = bedrock
        config = fields.get("inferenceConfig")
    elif gemini is not None:
        facts["model"], facts["stream"] = gemini[0], gemini[1]
        config = fields.get("generationConfig")
        names = ("temperature", "topP", "maxOutputTokens", "seed")
    elif (deployment := azure_deployment(path)) is not None:
        facts["model"] = deployment
    if isinstance(config, dict):
        nested = _request_parameters(
            {
                "temperature": config.get(names[0]),
                "top_p": config.get(names[1]),
                "max_tokens": config.get(names[2]),
                "seed": config.get(names[3]),
            }
        )
        facts.update({name: fact for name, fact in nested.items() if fact is not None})
    return facts


def _trace(headers: tuple[tuple[str, str], ...], mcp_message: JsonValue) -> dict[str, FactValue]:
    """The agent's span this exchange was sent from, per W3C Trace Context.

    MCP carries it per JSON-RPC message in `params._meta.traceparent` (MCP SEP-414,
    https://modelcontextprotocol.io/seps/414; OpenTelemetry's MCP semantic conventions), which
    names the tool call's own span and so wins over the HTTP header. Repeated headers are
    joined as HTTP joins them, which no valid traceparent survives.
    """
    candidates = [_meta_traceparent(mcp_message), _header(headers, "traceparent")]
    for value in candidates:
        ids = _trace_ids(value) if value is not None else None
        if ids is not None:
            return {"trace_id": ids[0], "parent_span_id": ids[1]}
    return {}


def _meta_traceparent(message: JsonValue) -> str | None:
    """`params._meta.traceparent` of a message, or of a batch's first message that has one."""
    for item in message if isinstance(message, list) else [message]:
        params = item.get("params") if isinstance(item, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        value = meta.get("traceparent") if isinstance(meta, dict) else None
        if isinstance(value, str):
            return value
    return None


def _trace_ids(traceparent: str) -> tuple[str, str] | None:
    """(trace id, parent span id) from a valid traceparent, else None."""
    match = _TRACEPARENT.fullmatch(traceparent.strip(" \t"))
    if match is None:
        return None
    version, trace_id, parent_id, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE_ID or parent_id == _ZERO_SPAN_ID:
        return None
    return trace_id, parent_id


def _response_headers(
    headers: tuple[tuple[str, str], ...], provider: str | None
) -> dict[str, FactValue]:
    """The request id the provider assigned, and every rate-limit header it sent."""
    facts: dict[str, FactValue] = {}
    for name in _REQUEST_ID_HEADERS.get(provider or "", _ANY_REQUEST_ID_HEADERS):
        value = _header(headers, name)
        if value:
            facts["request_id"] = value
            break
    limits: dict[str, str] = {}
    for name, value in headers:
        lowered = name.lower()
        if lowered in _RATE_LIMIT_NAMES or lowered.startswith(_RATE_LIMIT_PREFIXES):
            limits[lowered] = f"{limits[lowered]}, {value}" if lowered in limits else value
    if limits:
        facts["rate_limits"] = limits
    return facts


def _header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    """A header's value, repeated ones joined with ", " as HTTP allows; None when absent."""
    values = [value for key, value in headers if key.lower() == name]
    return ", ".join(values) if values else None


def answer_facts(response: ResponseView) -> dict[str, FactValue]:
    """What a model's answer says about itself, from its body: a whole JSON object or an SSE
    stream. `facts_of` reads an answer through here, and so does `evidence` (the case file),
    so the two cannot disagree about an answer's ids, usage and finish reason."""
    body = response.body
    # RFC 9110 §6.4.1: 1xx, 204 and 304 answers have no content.
    no_content = response.status < 200 or response.status in (204, 304)
    if not body or len(body) > FACTS_BODY_LIMIT or no_content:
        return {}
    answer = _Answer()
    media_type = response.content_type.split(";", 1)[0].strip().lower()
    if media_type == "text/event-stream" or (
        not media_type and body.lstrip().startswith((b"data:", b"event:", b":"))
    ):
        _read_stream(body, answer)
    elif eventstream.is_event_stream(media_type):
        # Converse's facts are in messageStop and metadata, InvokeModel's (Anthropic's
        # events) in message_start and message_delta and the last chunk's metrics.
        for event in eventstream.json_events(eventstream.ends(body, 2, 6))[0]:
            answer.read_event(event)
    elif not media_type or media_type == "application/json" or media_type.endswith("+json"):
        value = _json(body)
        # Gemini's streamGenerateContent without alt=sse: one JSON array of whole answers.
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                answer.read_event(item)
    return answer.facts()


def _read_stream(body: bytes, answer: "_Answer") -> None:
    """Feed the stream's events to `answer`, skipping those that cannot hold a fact."""
    for name, data in sse_events(body):
        if name in ("", "message"):
            if answer.knows_stream() and _MAY_HOLD_FACTS.search(data) is None:
                continue
        elif name not in _ANSWER_EVENTS:
            continue
        value = _json(data)
        if isinstance(value, dict):
            answer.read_event(value)


def sse_events(body: bytes) -> Iterator[tuple[str, bytes]]:
    """(event name, data) per event, as the HTML standard's event-stream format defines.

    https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation:
    lines end in CR, LF or CRLF, `:` starts a comment, one space after the colon is dropped,
    data lines join with LF and a blank line dispatches. An event cut off by the stream's end
    is read too, since a broken stream's last complete JSON still says something.
    """
    name = ""
    data: list[bytes] = []
    for line in body.splitlines():
        if not line:
            if data:
                yield name, b"\n".join(data)
            name, data = "", []
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if data:
        yield name, b"\n".join(data)


def _json(data: bytes) -> JsonValue:
    """The JSON value of `data`, or None when it is not JSON (`[DONE]`, a cut-off chunk)."""
    try:
        return read_json(data)
    except NotJson:
        return None


class _Answer:
    """Facts gathered from an answer's objects in order: ids once, outcome and usage last.

    Shapes, by the SDK types (openai 3.x, anthropic 2.x):
    - openai/types/chat/chat_completion.py and chat_completion_chunk.py, completion.py:
      id, model, system_fingerprint, usage, choices[].finish_reason (the first choice's
      reported, as `choices[0]` is what agents read).
    - openai/types/responses/response.py: id, model, usage, status, refined by
      incomplete_details.reason when incomplete; create_embedding_response.py: model, usage.
    - openai/types/completion_usage.py, responses/response_usage.py, anthropic/types/usage.py
      and message_delta_usage.py: integer counts, with `*_details` objects one level deep.
    - anthropic/types/message.py: id, model, stop_reason, usage; raw_message_delta_event.py:
      delta.stop_reason and usage, whose counts are cumulative and so replace message_start's;
      anthropic/types/shared/error_response.py: request_id, kept when no header gave one.
    """

    __slots__ = ("_found", "_usage", "_finish")

    def __init__(self) -> None:
        self._found: dict[str, str] = {}
        self._usage: dict[str, int] = {}
        self._finish: dict[int, str] = {}

    def knows_stream(self) -> bool:
        """True once the stream's id and model are known."""
        return "response_id" in self._found and "answered_model" in self._found

    def read_event(self, event: dict[str, JsonValue]) -> None:
        """Read one stream event or whole answer, by its `type` where it has one."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._read_object(message)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                self._finish_with(delta.get("stop_reason"), 0)
            self._add_usage(event.get("usage"))
        elif kind == "error":
            self._first("request_id", event.get("request_id"))
        elif isinstance(kind, str) and kind.startswith("response."):
            response = event.get("response")
            if isinstance(response, dict):
                self._read_object(response)
        elif kind in ("message-start", "message-end") or _is_cohere_answer(event):
            self._read_cohere(event)
        elif "candidates" in event or "usageMetadata" in event or "modelVersion" in event:
            self._read_gemini(event)
        elif isinstance(event.get("generation"), str):
            # Meta Llama's InvokeModel chunks: the counts so far, the stop reason on the last.
            self._add_usage({name: event.get(name) for name in _LLAMA_COUNTS})
            self._finish_with(event.get("stop_reason"), 0)
        elif len(named := [n for n in event if n != _BEDROCK_METRICS]) == 1 and (
            named[0] in _CONVERSE_EVENTS
        ):
            # One Converse event, or an Amazon Nova InvokeModel chunk (the metrics on its last).
            inner = event[named[0]]
            if isinstance(inner, dict):
                self._finish_with(inner.get("stopReason"), 0)
                self._add_usage(inner.get("usage"))
        else:
            self._read_object(event)

    def _read_gemini(self, answer: dict[str, JsonValue]) -> None:
        """A GenerateContentResponse, whole or one of a stream's (each is whole, its
        usage cumulative)."""
        self._first("response_id", answer.get("responseId"))
        self._first("answered_model", answer.get("modelVersion"))
        self._add_usage(answer.get("usageMetadata"))
        candidates = answer.get("candidates")
        for at, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
            if isinstance(candidate, dict):
                index = candidate.get("index")
                self._finish_with(candidate.get("finishReason"), index if _is_int(index) else at)

    def _read_cohere(self, answer: dict[str, JsonValue]) -> None:
        """Cohere's Chat v2 answer (cohere/v2/types/v2chat_response.py: id, finish_reason,
        usage), or a stream's message-start (its id) or message-end (cohere/types/
        chat_message_end_event_delta.py: delta.finish_reason, delta.usage). Its usage
        (cohere/types/usage.py) holds the counts twice: ``tokens`` as the model counted them,
        read as ``input_tokens`` and ``output_tokens`` as other providers' are, and
        ``billed_units`` as billed, kept as ``billed_units.*``."""
        self._first("response_id", answer.get("id"))
        delta = answer.get("delta")
        said = delta if isinstance(delta, dict) else answer
        self._finish_with(said.get("finish_reason"), 0)
        usage = said.get("usage")
        if not isinstance(usage, dict):
            return
        tokens = usage.get("tokens")
        if isinstance(tokens, dict):
            self._add_usage({name: tokens.get(name) for name in ("input_tokens", "output_tokens")})
        self._add_usage({"billed_units": usage.get("billed_units")})
        self._add_usage({"cached_tokens": usage.get("cached_tokens")})

    def facts(self) -> dict[str, FactValue]:
        facts: dict[str, FactValue] = {**self._found}
        if self._usage:
            facts["usage"] = dict(self._usage)
        if self._finish:
            facts["finish_reason"] = self._finish[min(self._finish)]
        return facts

    def _read_object(self, answer: dict[str, JsonValue]) -> None:
        self._first("response_id", answer.get("id"))
        self._first("answered_model", answer.get("model"))
        self._first("system_fingerprint", answer.get("system_fingerprint"))
        self._add_usage(answer.get("usage"))
        choices = answer.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict):
                index = choice.get("index")
                self._finish_with(choice.get("finish_reason"), index if _is_int(index) else 0)
        self._finish_with(answer.get("stop_reason"), 0)
        self._finish_with(answer.get("stopReason"), 0)
        if answer.get("object") == "response":
            details = answer.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self._finish_with(reason if isinstance(reason, str) else answer.get("status"), 0)

    def _first(self, name: str, value: JsonValue) -> None:
        if isinstance(value, str) and value and name not in self._found:
            self._found[name] = value

    def _finish_with(self, reason: JsonValue, index: int) -> None:
        if isinstance(reason, str) and reason:
            self._finish[index] = reason

    def _add_usage(self, usage: JsonValue) -> None:
        if not isinstance(usage, dict):
            return
        for name, value in usage.items():
            if _is_int(value):
                self._usage[name] = value
            elif isinstance(value, dict):
                for detail, count in value.items():
                    if _is_int(count):
                        self._usage[f"{name}.{detail}"] = count


def _is_cohere_answer(answer: dict[str, JsonValue]) -> bool:
    """A whole Chat v2 answer: its finish reason beside its message, where OpenAI's chat puts
    one in each choice."""
    return "finish_reason" in answer and "message" in answer and "choices" not in answer


def _is_int(value: object) -> TypeGuard[int]:
    """A JSON integer a column can hold (not a bool, which Python counts as an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value in _INT64
