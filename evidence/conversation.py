"""One model call as the model saw it, and what it answered: the case file's "one exchange".

`conversation_of` reads a recorded exchange of OpenAI Chat Completions, OpenAI Responses or
Anthropic Messages (streamed or not, on any host that serves their paths), or an OpenAI
Realtime session (a WebSocket, providers.realtime: its last response is the answer) into a
`Conversation`: the system prompt, every message by role with its parts, tool calls and
tool results with their ids, the tools offered, and the answer with its text and tool calls
put back together from the stream, its finish reason, usage and ids, the model asked for
and the model that answered, and the tokens used against the model's context window where
that is known. Everything comes from the recorded bytes; only where the bytes cannot be
read (a body the store keeps out of memory) do the recorded metadata fill in what they
know. What could not be read is said in ``notes``, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from freezeframe.canonicalize.profiles.mcp import is_json_rpc_request
from freezeframe.canonicalize.providers import model_in_path, provider_of
from freezeframe.evidence.windows import ContextUse, context_use
from freezeframe.providers.answers import Answer, read_answer
from freezeframe.providers.apis import api_of
from freezeframe.providers.bodies import as_dict, header, json_ready, parse_json, request_body
from freezeframe.providers.messages import Message, MessageMemo, Tool, ToolCall, ToolResult
from freezeframe.providers.parts import Part
from freezeframe.providers.realtime import API as REALTIME
from freezeframe.providers.realtime import is_realtime, read_session
from freezeframe.storage import Exchange


@dataclass(frozen=True, slots=True)
class Conversation:
    """A model call: what the model was shown, and what it answered."""

    seq: int
    """The exchange's place in its cassette."""
    provider: str
    """Who served it, in OpenTelemetry's words: ``openai``, ``anthropic``, ``aws.bedrock``,
    ``gcp.gemini``, ``gcp.vertex_ai`` or ``azure.ai.openai``."""
    api: str
    """``openai.chat-completions``, ``openai.responses``, ``anthropic.messages``,
    ``bedrock.converse``, ``bedrock.invoke`` or ``gemini.generate-content``."""
    model: str | None
    """The model asked for; the answer's ``model`` is the one that answered."""
    stream: bool
    """A streamed answer was asked for."""
    system: str
    """The system prompt, whole (see `providers.messages.Prompt.system`)."""
    messages: tuple[Message, ...]
    """Every message, in order, as the request carried them."""
    tools: tuple[Tool, ...]
    """The tools offered, with their schemas."""
    answer: Answer | None
    """None when no answer came (refused, reset, timed out)."""
    context: ContextUse | None
    """Tokens against the model's context window; None when the window is not known."""
    notes: tuple[str, ...]
    """What could not be read, and why: a body kept in the store, a cut-off stream, an
    unknown content coding, turns held by the provider."""

    def tool_results(self) -> Iterator[ToolResult]:
        """Every tool result the request carried back to the model."""
        for message in self.messages:
            yield from message.tool_results


def conversation_of(exchange: Exchange) -> Conversation | None:
    """The conversation of a model call; None for any other exchange."""
    return _conversation(exchange, {})


def conversations_of(exchanges: Iterable[Exchange]) -> Iterator[Conversation | None]:
    """`conversation_of` each exchange of a run, in the order given (recorded order reads
    fastest): each request repeats the conversation so far, and only what it adds to the
    one before is read anew (see `providers.messages.MessageMemo`)."""
    memos: dict[str, MessageMemo] = {}
    for exchange in exchanges:
        yield _conversation(exchange, memos)


def _conversation(exchange: Exchange, memos: dict[str, MessageMemo]) -> Conversation | None:
    if is_realtime(exchange):
        return _realtime(exchange)
    api = api_of(exchange.recorded.method, exchange.recorded.path)
    if api is None:
        return None
    body = request_body(exchange)
    value = parse_json(body.data) if body.data else None
    if is_json_rpc_request(value):
        return None  # an MCP server on a path that ends like a model API's
    notes = [body.note] if body.note else []
    fields = as_dict(value)
    if body.whole and body.data and not fields:
        notes.append("the request body is not a JSON object")
    prompt = api.read_prompt(fields, memos.setdefault(api.api, MessageMemo()))
    answer, answer_notes = read_answer(api, exchange)
    path, _, query = exchange.recorded.path.partition("?")
    asked = model_in_path(path) or prompt.model or _recorded(exchange, "model")
    answered = answer.model if answer is not None else None
    beta = header(exchange.recorded.request_headers, b"anthropic-beta")
    served_by = provider_of(api.api, exchange.recorded.host, path, parse_qsl(query))
    return Conversation(
        seq=exchange.seq,
        provider=served_by or api.provider,
        api=api.api,
        model=asked,
        stream=prompt.stream or exchange.recorded.facts.get("stream") is True,
        system=prompt.system,
        messages=prompt.messages,
        tools=prompt.tools,
        answer=answer,
        context=context_use(answered or asked, answer.usage if answer else {}, beta),
        notes=(*notes, *prompt.notes, *answer_notes),
    )


def _realtime(exchange: Exchange) -> Conversation:
    """A Realtime session (a WebSocket): its turns, and its last response as the answer."""
    session = read_session(exchange)
    usage = session.answer.usage if session.answer else {}
    return Conversation(
        seq=exchange.seq,
        provider="openai",
        api=REALTIME,
        model=session.model,
        stream=True,
        system=session.system,
        messages=session.messages,
        tools=session.tools,
        answer=session.answer,
        context=context_use(session.model, usage, None),
        notes=session.notes,
    )


def _recorded(exchange: Exchange, name: str) -> str | None:
    value = exchange.recorded.facts.get(name)
    return value if isinstance(value, str) else None


def conversation_document(conversation: Conversation) -> dict[str, Any]:
    """The conversation as one JSON-ready document (the case file's JSON twin)."""
    c = conversation
    return {
        "seq": c.seq,
        "provider": c.provider,
        "api": c.api,
        "model": c.model,
        "stream": c.stream,
        "system": c.system,
        "messages": [message_document(m) for m in c.messages],
        "tools": [tool_document(t) for t in c.tools],
        "answer": None if c.answer is None else answer_document(c.answer),
        "context": None if c.context is None else context_document(c.context),
        "notes": list(c.notes),
    }


def message_document(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "text": message.text,
        "parts": [part_document(p) for p in message.parts],
        "tool_calls": [tool_call_document(c) for c in message.tool_calls],
        "tool_results": [tool_result_document(r) for r in message.tool_results],
    }


def part_document(part: Part) -> dict[str, Any]:
    return {"kind": part.kind, "text": part.text}


def tool_call_document(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": call.name,
        "kind": call.kind,
        "arguments": call.arguments,
        "value": json_ready(call.value),
    }


def tool_result_document(result: ToolResult) -> dict[str, Any]:
    return {
        "call_id": result.call_id,
        "name": result.name,
        "text": result.text,
        "is_error": result.is_error,
        "parts": [part_document(p) for p in result.parts],
    }


def tool_document(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "kind": tool.kind,
        "description": tool.description,
        "parameters": json_ready(tool.parameters),
    }


def answer_document(answer: Answer) -> dict[str, Any]:
    return {
        "status": answer.status,
        "streamed": answer.streamed,
        "complete": answer.complete,
        "text": answer.text,
        "parts": [part_document(p) for p in answer.parts],
        "tool_calls": [tool_call_document(c) for c in answer.tool_calls],
        "finish_reason": answer.finish_reason,
        "usage": dict(answer.usage),
        "system_fingerprint": answer.system_fingerprint,
        "response_id": answer.response_id,
        "model": answer.model,
        "error": answer.error,
    }


def context_document(context: ContextUse) -> dict[str, Any]:
    return {
        "window": context.window,
        "family": context.family,
        "input_tokens": context.input_tokens,
        "output_tokens": context.output_tokens,
        "used": context.used,
        "share": context.share,
    }
