"""What went wrong in one exchange, as a signature a person can read, and what a run-level
reading needs from it later, both worked out once, when the exchange is recorded or imported.

A signature is one line: the failure's kind, the provider API or tool endpoint as a template
(evidence.masking: ids, numbers, UUIDs and hashes masked), the status, the provider's error
type and code, how the answer ended, and the error message with its variable parts masked.
Two failures with the same signature are the same failure; that is how triage groups them.

Kinds read from one exchange, the first that applies:

- ``upstream_failure``: no answer came (refused, reset, timeout, TLS), or a tool's answer
  was cut off;
- ``provider_error``: a model call answered >= 400 (the provider's error type and code), or
  a stream that carried an error event;
- ``tool_error``: any other call answered >= 400;
- ``truncation``: a model's answer stopped at its token limit (``finish_reason: length``,
  ``stop_reason: max_tokens``, a Response ``incomplete`` for ``max_output_tokens``) or its
  stream was cut;
- ``context``: the prompt took >= CONTEXT_SHARE of the model's context window
  (evidence.windows knows the windows of well-known models; an unknown model is never
  guessed);
- ``schema``: a tool call's arguments break the JSON Schema the request offered for that
  tool (evidence.toolschema, which says which rule).

For the kinds only a run shows (evidence.triage: loops, dropped context, ignored tool
errors), a model call also keeps a small **trace**: its tool calls (name and a digest of the
arguments as loops compare them), digests of its system prompt and first message, how many
messages it carried, and whether the messages it added since the model last spoke mention
an error. Changing any rule here changes what is stored, so SIGNATURE_VERSION goes up with
it and ``freezeframe triage --rebuild`` brings stored signatures up to date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from blake3 import blake3

from freezeframe.canonicalize.jsonbody import JsonValue, Number
from freezeframe.evidence.conversation import Conversation, conversation_of
from freezeframe.evidence.loops import loop_key
from freezeframe.evidence.masking import mask_text, path_template
from freezeframe.evidence.toolschema import violations
from freezeframe.providers.apis import api_of
from freezeframe.providers.bodies import as_dict, media_type, parse_json, response_body
from freezeframe.providers.messages import Message, ToolCall
from freezeframe.storage import Exchange, NewExchange, Outcome, Signals

SIGNATURE_VERSION = 2
"""The rules' version; stored with every exchange's signals (storage.Signals.version).
2: model names kept whole and a short name's closing number masked (evidence.masking)."""

UPSTREAM_FAILURE = "upstream_failure"
PROVIDER_ERROR = "provider_error"
TOOL_ERROR = "tool_error"
TRUNCATION = "truncation"
CONTEXT = "context"
SCHEMA = "schema"
LOOP = "loop"
IGNORED_TOOL_ERROR = "ignored_tool_error"
KINDS = (
    PROVIDER_ERROR,
    UPSTREAM_FAILURE,
    TRUNCATION,
    TOOL_ERROR,
    LOOP,
    SCHEMA,
    CONTEXT,
    IGNORED_TOOL_ERROR,
)
"""Every failure kind, as the contract names them."""

TRACE_CALLS = 16
"""Tool calls of one answer a trace keeps: loops are read from them, and a trace stays short."""
NAME_MAX = 64
"""Characters of a tool's name a trace keeps (OpenAI allows 64)."""
CONTEXT_SHARE = 0.9
"""The share of the context window a prompt may take before it is a failure."""
LENGTH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})
"""Finish reasons that say the answer hit its token limit (Chat, Messages, Responses)."""
_ERROR_WORDS = re.compile(
    r"error|fail|exception|unavailable|denied|forbidden|not found|timed? ?out|refused|invalid",
    re.IGNORECASE,
)
_STATUS = re.compile(r"(?<!\d)([45]\d\d)(?!\d)")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure read from an exchange."""

    kind: str
    signature: str


def signals_of(exchange: Exchange) -> Signals:
    """The exchange's failure (if any) and its trace (if a model call), to store with it."""
    api = api_of(exchange.recorded.method, exchange.recorded.path)
    conversation = conversation_of(exchange) if api is not None else None
    failure = _failure(exchange, conversation)
    trace = None if conversation is None else _trace(conversation)
    return Signals(
        SIGNATURE_VERSION,
        None if failure is None else failure.kind,
        None if failure is None else failure.signature,
        trace,
    )


def with_signals(exchange: NewExchange) -> NewExchange:
    """``exchange`` carrying its signals, read from it as the store will read it back."""
    # Read without its WebSocket messages, as this has always read it.
    recorded = Exchange(replace(exchange, messages=None), chain="")
    return replace(exchange, signals=signals_of(recorded))


def endpoint(exchange: Exchange) -> str:
    """``METHOD host/path/{id}``: the call, its variable segments masked."""
    recorded = exchange.recorded
    return f"{recorded.method.upper()} {recorded.host}{path_template(recorded.path)}"


def _failure(exchange: Exchange, conversation: Conversation | None) -> Failure | None:
    where = endpoint(exchange)
    model = conversation is not None
    response = exchange.recorded.response
    if exchange.recorded.outcome is Outcome.FAILED or response is None:
        why = mask_text(exchange.recorded.error or exchange.recorded.outcome.value)
        return Failure(UPSTREAM_FAILURE, f"{UPSTREAM_FAILURE} {where}: {why}")
    if response.status >= 400:
        kind = PROVIDER_ERROR if model else TOOL_ERROR
        return Failure(kind, f"{kind} {where} {response.status}{_error_detail(exchange)}")
    if exchange.recorded.outcome is Outcome.TRUNCATED and not model:
        why = mask_text(exchange.recorded.error or "the answer was cut off")
        return Failure(UPSTREAM_FAILURE, f"{UPSTREAM_FAILURE} {where}: {why}")
    if conversation is None:
        return None
    return _model_failure(exchange, conversation, where)


def _model_failure(exchange: Exchange, c: Conversation, where: str) -> Failure | None:
    answer = c.answer
    if answer is not None and answer.error:
        return Failure(
            PROVIDER_ERROR, f"{PROVIDER_ERROR} {where} stream: {mask_text(answer.error)}"
        )
    if answer is not None and answer.finish_reason in LENGTH_REASONS:
        reason = f"finish_reason {answer.finish_reason}"
        return Failure(TRUNCATION, f"{TRUNCATION} {where}: {reason}")
    if exchange.recorded.outcome is Outcome.TRUNCATED or (
        answer is not None and not answer.complete
    ):
        return Failure(TRUNCATION, f"{TRUNCATION} {where}: the stream was cut")
    use = c.context
    if use is not None and use.input_tokens is not None:
        if use.input_tokens >= CONTEXT_SHARE * use.window:
            share = f"{CONTEXT_SHARE:.0%}"
            return Failure(
                CONTEXT, f"{CONTEXT} {where}: prompt at >= {share} of {use.family}'s window"
            )
    if answer is not None and answer.tool_calls:
        calls = tuple(plain_call(call) for call in answer.tool_calls)
        for violation in violations(calls, c.tools):
            return Failure(SCHEMA, f"{SCHEMA} {violation.summary}")
    return None


def plain_call(call: ToolCall) -> ToolCall:
    """The call with its arguments as plain Python values, as JSON Schema validators read
    JSON (the canonical reader keeps some numbers as exact tokens)."""
    return ToolCall(call.id, call.name, call.arguments, _plain(call.value), call.kind)


def _plain(value: JsonValue) -> JsonValue:
    if isinstance(value, Number):
        number = float(value.token)
        return int(number) if number.is_integer() and "." not in value.token else number
    if isinstance(value, dict):
        return {name: _plain(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _error_detail(exchange: Exchange) -> str:
    """`` type/code: message`` from an error body (OpenAI's and Anthropic's shape, and the
    common ``{"error": "..."}``, ``{"message": ...}``, ``{"detail": ...}``), masked; "" when
    the body says nothing readable."""
    body = response_body(exchange)
    if body is None or not body.data:
        return ""
    value = as_dict(parse_json(body.data))
    if not value:
        if (
            media_type(exchange.recorded.response.headers if exchange.recorded.response else ())
            == "text/plain"
        ):
            line = body.data[:200].decode("utf-8", "replace").splitlines()
            return f": {mask_text(line[0])}" if line else ""
        return ""
    error = value.get("error")
    fields = as_dict(error) if isinstance(error, dict) else value
    names = [
        str(fields[name])
        for name in ("type", "code")
        if isinstance(fields.get(name), str | int) and not isinstance(fields.get(name), bool)
    ]
    message = next(
        (
            item
            for item in (
                error if isinstance(error, str) else None,
                fields.get("message"),
                fields.get("detail"),
            )
            if isinstance(item, str) and item
        ),
        "",
    )
    named = f" {'/'.join(dict.fromkeys(names))}" if names else ""
    said = f": {mask_text(message)}" if message else ""
    return named + said


def _digest(text: str) -> str:
    return blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _trace(c: Conversation) -> str:
    """What the run-level readings need of a model call (see Trace)."""
    others = [m for m in c.messages if m.role not in {"system", "developer"}]
    asked = () if c.answer is None else c.answer.tool_calls[:TRACE_CALLS]
    calls = tuple((t.name[:NAME_MAX], _digest(loop_key(t))) for t in asked)
    tail = _since_model_spoke(c.messages)
    said = "\n".join(_message_text(m) for m in tail)
    return Trace.of(
        api=c.api,
        system=_digest(c.system) if c.system else "",
        first=_digest(_message_text(others[0])) if others else "",
        messages=len(others),
        codes=tuple(sorted({int(code) for code in _STATUS.findall(said)})),
        error=bool(_ERROR_WORDS.search(said))
        or any(r.is_error for m in tail for r in m.tool_results),
        calls=calls,
    ).encode()


class Trace(NamedTuple):
    """A model call as the run-level readings see it, stored as one line of tab-separated
    fields and read back as they are (a named tuple of strings: triage reads one per model
    call of a store, and parses only what a reading needs):

    api, digests of the system prompt and of the first other message ("" when none), how
    many other messages it carried, the 4xx/5xx statuses (comma-separated) and whether an
    error word appear (``1``/``0``) in what the client added since the model last spoke, and
    the tool calls the answer asked for, comma-separated, each ``name:digest`` of its
    arguments as loops compare them."""

    api: str
    system: str
    first: str
    messages: str
    codes: str
    error: str
    calls: str

    @classmethod
    def of(
        cls,
        *,
        api: str,
        system: str,
        first: str,
        messages: int,
        codes: tuple[int, ...],
        error: bool,
        calls: tuple[tuple[str, str], ...],
    ) -> Trace:
        return cls(
            api,
            system,
            first,
            str(messages),
            ",".join(str(code) for code in codes),
            "1" if error else "0",
            ",".join(f"{_field(name)}:{key}" for name, key in calls),
        )

    def encode(self) -> str:
        return "\t".join(self)

    @classmethod
    def decode(cls, text: str) -> Trace | None:
        """None for text that is not a trace (written by other rules)."""
        parts = text.split("\t")
        return cls._make(parts) if len(parts) == 7 else None

    def mentions(self, status: int | None) -> bool:
        """What the client added since the model last spoke mentions an error, or ``status``."""
        return self.error == "1" or (status is not None and str(status) in self.codes.split(","))

    def tool_calls(self) -> list[tuple[str, str]]:
        """(tool name, ``name:digest``) of each call: the second is what loops compare."""
        return (
            [(item[: item.rfind(":")], item) for item in self.calls.split(",")]
            if self.calls
            else []
        )

    def carried(self) -> int:
        """How many messages other than system ones the call carried."""
        return int(self.messages) if self.messages.isdigit() else 0


def _field(name: str) -> str:
    """A tool name as a trace holds it: without the separators of the trace's fields."""
    return name.translate({9: 32, 44: 32, 58: 32})


def _since_model_spoke(messages: Iterable[Message]) -> list[Message]:
    """The messages after the model's last one: what the client added this turn."""
    ordered = list(messages)
    for position in range(len(ordered) - 1, -1, -1):
        if ordered[position].role == "assistant":
            return ordered[position + 1 :]
    return []


def _message_text(message: Message) -> str:
    results = "\n".join(result.text for result in message.tool_results)
    return f"{message.role}\n{message.text}\n{results}"


def trace_of(text: str | None) -> Trace | None:
    """A stored trace read back; None when there is none or it cannot be read."""
    return Trace.decode(text) if text else None
