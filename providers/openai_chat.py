"""OpenAI Chat Completions (and the many servers that copy it): request, answer, stream.

Shapes, by the SDK types (openai 3.x, openai/types/chat/):
- completion_create_params.py: ``model``, ``messages``, ``tools``, ``stream``, and the
  deprecated ``functions``.
- chat_completion_{system,developer,user,assistant,tool,function}_message_param.py: every
  message has ``role`` and ``content`` (a string or content parts); an assistant message
  may carry ``refusal``, ``tool_calls`` and the deprecated ``function_call``; a ``tool``
  message answers the call named by ``tool_call_id``, a ``function`` message by ``name``.
- chat_completion_message_function_tool_call_param.py (``id``, ``function.name``,
  ``function.arguments``) and chat_completion_message_custom_tool_call_param.py (``id``,
  ``custom.name``, ``custom.input``).
- chat_completion_function_tool_param.py (``function``: ``name``, ``description``,
  ``parameters``) and chat_completion_custom_tool_param.py (``custom``: ``name``,
  ``description``, ``format``).
- chat_completion.py: ``choices[].message`` is an assistant message as above; agents read
  ``choices[0]``, and so does this.
- chat_completion_chunk.py: ``choices[].delta`` carries pieces: ``content`` and ``refusal``
  text, and ``tool_calls[]`` whose ``index`` says which call a piece belongs to, the first
  piece bringing ``id``, ``type`` and ``function.name``, every piece a bit of
  ``function.arguments`` (the SDK joins them in openai/lib/streaming/_deltas.py). A stream
  ends with ``data: [DONE]``.
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_str
from freezeframe.providers.messages import (
    CUSTOM,
    FUNCTION,
    Message,
    MessageMemo,
    Prompt,
    Tool,
    ToolCall,
    message,
    tool_call,
    tool_result,
)
from freezeframe.providers.parts import REFUSAL, Part, content_parts
from freezeframe.providers.streams import error_text, index_of, listed

API = "openai.chat-completions"
SYSTEM_ROLES = frozenset({"system", "developer"})


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    messages = memo.read(listed(body.get("messages")), read_message)
    system = "\n".join(m.text for m in messages if m.role in SYSTEM_ROLES)
    tools = [_tool(item) for item in listed(body.get("tools"))]
    tools += [_function(item, FUNCTION) for item in listed(body.get("functions"))]
    return Prompt(
        model=as_str(body.get("model")),
        stream=body.get("stream") is True,
        system=system,
        messages=messages,
        tools=tuple(tools),
    )


def read_message(item: dict[str, JsonValue]) -> Message:
    """One message of a request, or the message of an answer's choice."""
    role = as_str(item.get("role")) or "assistant"
    parts = content_parts(item.get("content"))
    refusal = as_str(item.get("refusal"))
    if refusal:
        parts += (Part(REFUSAL, refusal),)
    calls = tuple(_call(call) for call in listed(item.get("tool_calls")))
    legacy = as_dict(item.get("function_call"))
    if legacy:
        calls += (tool_call(None, as_str(legacy.get("name")) or "", _arguments(legacy)),)
    if role == "tool":
        return message(role, (), calls, (tool_result(as_str(item.get("tool_call_id")), parts),))
    if role == "function":
        name = as_str(item.get("name"))
        return message(role, (), calls, (tool_result(None, parts, name=name),))
    return message(role, parts, calls)


def read_answer(whole: dict[str, JsonValue]) -> Message:
    choices = listed(whole.get("choices"))
    first = next((c for c in choices if c.get("index") == 0), choices[0] if choices else {})
    return read_message({"role": "assistant", **as_dict(first.get("message"))})


def _call(call: dict[str, JsonValue]) -> ToolCall:
    call_id = as_str(call.get("id"))
    custom = as_dict(call.get("custom"))
    if call.get("type") == CUSTOM or custom:
        return tool_call(call_id, as_str(custom.get("name")) or "", _text(custom, "input"), CUSTOM)
    function = as_dict(call.get("function"))
    return tool_call(call_id, as_str(function.get("name")) or "", _arguments(function))


def _arguments(function: dict[str, JsonValue]) -> str:
    return _text(function, "arguments")


def _text(fields: dict[str, JsonValue], name: str) -> str:
    return as_str(fields.get(name)) or ""


def _tool(item: dict[str, JsonValue]) -> Tool:
    kind = as_str(item.get("type")) or FUNCTION
    if kind == FUNCTION:
        return _function(as_dict(item.get("function")), FUNCTION)
    if kind == CUSTOM:
        return _function(as_dict(item.get("custom")), CUSTOM)
    return Tool(kind, kind, None, None)


def _function(fields: dict[str, JsonValue], kind: str) -> Tool:
    parameters = fields.get("parameters") if kind == FUNCTION else fields.get("format")
    return Tool(
        name=as_str(fields.get("name")) or "",
        kind=kind,
        description=as_str(fields.get("description")),
        parameters=parameters,
    )


class ChatStream:
    """A chat stream's first choice, put back together."""

    end_marker = "data: [DONE] or a finish_reason"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _CallPieces] = {}
        self._legacy = _CallPieces()

    def feed(self, event: dict[str, JsonValue]) -> None:
        self.error = self.error or error_text(event)
        for choice in listed(event.get("choices")):
            if index_of(choice.get("index"), 0) != 0:
                continue
            delta = as_dict(choice.get("delta"))
            _add(self._content, delta.get("content"))
            _add(self._refusal, delta.get("refusal"))
            for piece in listed(delta.get("tool_calls")):
                index = index_of(piece.get("index"), len(self._calls))
                self._calls.setdefault(index, _CallPieces()).feed(piece)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                self._legacy.feed({"function": legacy})
            if isinstance(choice.get("finish_reason"), str):
                self.ended = True

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        answer: dict[str, JsonValue] = {
            "content": "".join(self._content) or None,
            "refusal": "".join(self._refusal) or None,
            "tool_calls": [self._calls[index].whole() for index in sorted(self._calls)],
        }
        if self._legacy.started:
            answer["function_call"] = as_dict(self._legacy.whole().get("function"))
        return {"choices": [{"index": 0, "message": answer}]}


class _CallPieces:
    """One streamed tool call: its id and type from the first piece that has them, name and
    arguments joined from all pieces, as the SDK's ``accumulate_delta`` joins them."""

    def __init__(self) -> None:
        self.started = False
        self._id: str | None = None
        self._type: str | None = None
        self._name: list[str] = []
        self._arguments: list[str] = []

    def feed(self, piece: dict[str, JsonValue]) -> None:
        self.started = True
        self._id = self._id or as_str(piece.get("id"))
        self._type = self._type or as_str(piece.get("type"))
        function = as_dict(piece.get("function"))
        _add(self._name, function.get("name"))
        _add(self._arguments, function.get("arguments"))

    def whole(self) -> dict[str, JsonValue]:
        function: dict[str, JsonValue] = {
            "name": "".join(self._name),
            "arguments": "".join(self._arguments),
        }
        return {"id": self._id, "type": self._type or FUNCTION, "function": function}


def _add(pieces: list[str], piece: JsonValue) -> None:
    if isinstance(piece, str) and piece:
        pieces.append(piece)
