"""Google Gemini (the Gemini API and Vertex AI): a request, a whole answer, or its stream.

Shapes, by the REST reference of ``generateContent`` (google-genai's ``types.py`` mirrors
it as Content, Part, Tool, GenerateContentResponse):
- the request: ``contents`` (``role``: ``user`` | ``model``; ``parts``), ``systemInstruction``
  (a Content), ``tools`` (``functionDeclarations``: ``name``, ``description``,
  ``parameters`` or ``parametersJsonSchema`` (``parameters_json_schema`` as google-genai
  sends it); or a built-in tool such as ``googleSearch``,
  ``codeExecution``); the model and whether it streams are the path's.
- a Part holds one of: ``text`` (a thought when ``thought`` is true), ``inlineData``
  (``mimeType``, ``data``), ``fileData`` (``mimeType``, ``fileUri``), ``functionCall``
  (``id`` where the API gives one, ``name``, ``args``), ``functionResponse`` (``id``,
  ``name``, ``response``), ``executableCode``, ``codeExecutionResult``. The Gemini API
  mostly gives calls no ``id``; it then pairs the responses of a turn with its calls by
  name, in order, and so does `evidence.steps`.
- the answer: ``candidates[]`` (``content``, ``finishReason``, ``index``),
  ``usageMetadata``, ``modelVersion``, ``responseId``. A stream (``streamGenerateContent``)
  sends whole GenerateContentResponses, each with the next piece of the text, as
  server-sent events (``alt=sse``, no ``[DONE]``) or as one JSON array; the one that carries
  a ``finishReason`` is the last.

Gemini's ``model`` role is read as ``assistant``, as every other API names it.
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_list, as_str, json_text
from freezeframe.providers.messages import (
    FUNCTION,
    Message,
    MessageMemo,
    Prompt,
    Tool,
    ToolCall,
    ToolResult,
    message,
    tool_call,
    tool_result,
)
from freezeframe.providers.parts import AUDIO, FILE, IMAGE, TEXT, THINKING, Part, joined_text
from freezeframe.providers.streams import error_text, listed

API = "gemini.generate-content"
_ROLES = {"model": "assistant"}


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    messages = memo.read(listed(body.get("contents")), read_content)
    instruction = body.get("systemInstruction")
    if isinstance(instruction, str):
        system = instruction
    else:
        system = joined_text(_part(p) for p in listed(as_dict(instruction).get("parts")))
    tools: list[Tool] = []
    for item in listed(body.get("tools")):
        declared = listed(item.get("functionDeclarations"))
        tools += [_function(declaration) for declaration in declared]
        tools += [Tool(name, name, None, None) for name in item if name != "functionDeclarations"]
    return Prompt(model=None, stream=False, system=system, messages=messages, tools=tuple(tools))


def read_content(content: dict[str, JsonValue]) -> Message:
    """A Content: its function calls and responses taken out, the rest as parts."""
    role = as_str(content.get("role")) or "user"
    parts: list[Part] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for item in listed(content.get("parts")):
        call = as_dict(item.get("functionCall"))
        response = as_dict(item.get("functionResponse"))
        if call:
            arguments = json_text(call.get("args") if "args" in call else {})
            calls.append(
                tool_call(as_str(call.get("id")), as_str(call.get("name")) or "", arguments)
            )
        elif response:
            said = (Part(TEXT, json_text(response.get("response"))),)
            name = as_str(response.get("name"))
            results.append(tool_result(as_str(response.get("id")), said, name=name))
        else:
            parts.append(_part(item))
    return message(_ROLES.get(role, role), tuple(parts), tuple(calls), tuple(results))


def read_answer(whole: dict[str, JsonValue]) -> Message:
    first = as_dict(as_list(whole.get("candidates"))[0]) if as_list(whole.get("candidates")) else {}
    return read_content({"role": "model", **as_dict(first.get("content"))})


def _part(item: dict[str, JsonValue]) -> Part:
    text = item.get("text")
    if isinstance(text, str):
        return Part(THINKING if item.get("thought") is True else TEXT, text)
    inline = as_dict(item.get("inlineData"))
    stored = as_dict(item.get("fileData"))
    if inline or stored:
        media = as_str((inline or stored).get("mimeType")) or "data"
        data = as_str(inline.get("data"))
        if data is not None:
            where = f"{media}, {len(data.rstrip('=')) * 3 // 4:,} bytes inline"
        else:
            where = as_str(stored.get("fileUri")) or media
        kind = (
            IMAGE if media.startswith("image/") else AUDIO if media.startswith("audio/") else FILE
        )
        return Part(kind, where)
    name = next((key for key in item if key not in ("thought", "thoughtSignature")), "unknown")
    return Part(name, json_text(item.get(name))[:500])


_SCHEMAS = ("parametersJsonSchema", "parameters_json_schema", "parameters")
"""Where a declaration's schema is: the API reads proto JSON, which takes a field's own
snake_case name too, and google-genai sends ``parameters_json_schema`` so."""


def _function(declaration: dict[str, JsonValue]) -> Tool:
    schema = next((declaration[name] for name in _SCHEMAS if name in declaration), None)
    name = as_str(declaration.get("name")) or ""
    return Tool(name, FUNCTION, as_str(declaration.get("description")), schema)


class GeminiStream:
    """Whole answers in order, each with the next piece: texts joined, calls kept."""

    end_marker = "a finishReason"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._parts: list[dict[str, JsonValue]] = []
        self._last: dict[str, JsonValue] = {}
        self._finish: JsonValue = None
        self._pieces: list[str] = []

    def feed(self, event: dict[str, JsonValue]) -> None:
        if "error" in event:
            self.error = self.error or error_text(event)
            return
        self._last = event
        candidates = listed(event.get("candidates"))
        first = candidates[0] if candidates else {}
        for item in listed(as_dict(first.get("content")).get("parts")):
            self._add(item)
        if first.get("finishReason"):
            self._finish = first["finishReason"]
            self.ended = True

    def _add(self, item: dict[str, JsonValue]) -> None:
        text = item.get("text")
        before = self._parts[-1] if self._parts else None
        same_kind = before is not None and before.get("thought") == item.get("thought")
        if isinstance(text, str) and before is not None and "text" in before and same_kind:
            self._pieces.append(text)
            return
        self._flush()
        self._parts.append(dict(item))
        if isinstance(text, str):
            self._pieces = [text]

    def _flush(self) -> None:
        if self._parts and "text" in self._parts[-1] and self._pieces:
            self._parts[-1]["text"] = "".join(self._pieces)
        self._pieces = []

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        self._flush()
        if self._parts and "text" in self._parts[-1]:
            self._pieces = [str(self._parts[-1]["text"])]
        parts: list[JsonValue] = [dict(part) for part in self._parts]
        candidate: dict[str, JsonValue] = {"content": {"role": "model", "parts": parts}}
        if self._finish is not None:
            candidate["finishReason"] = self._finish
        whole: dict[str, JsonValue] = {"candidates": [candidate]}
        for name in ("usageMetadata", "modelVersion", "responseId"):
            if name in self._last:
                whole[name] = self._last[name]
        return whole
