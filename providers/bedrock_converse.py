"""AWS Bedrock Converse: a request, a whole answer, or its event stream.

Shapes, by botocore's ``bedrock-runtime`` service model (service-2.json):
- ConverseRequest: ``messages`` (``role``: ``user`` | ``assistant``; ``content``: a list
  of ContentBlocks), ``system`` (SystemContentBlocks: ``{"text"}``), ``toolConfig.tools``
  (``{"toolSpec": {"name", "description", "inputSchema": {"json": schema}}}``); the model is
  the path's.
- ContentBlock is a union, one member set per block: ``text``, ``image``, ``document``,
  ``video``, ``toolUse`` (``toolUseId``, ``name``, ``input``: a document),
  ``toolResult`` (``toolUseId``, ``content``: blocks of ``text`` | ``json`` | ``image`` |
  ``document``, ``status``: ``success`` | ``error``), ``reasoningContent``
  (``reasoningText.text``, or ``redactedContent``), ``guardContent``, ``cachePoint``.
- ConverseResponse: ``output.message`` (an assistant message), ``stopReason``, ``usage``,
  ``metrics``.
- ConverseStreamOutput events, each ``{event type: payload}`` as boto3 gives them:
  ``messageStart`` (``role``), ``contentBlockStart`` (``start.toolUse``: ``toolUseId``,
  ``name``), ``contentBlockDelta`` (``delta``: ``text`` | ``toolUse.input``, a piece of
  JSON text | ``reasoningContent.text`` | ``.signature``), ``contentBlockStop``,
  ``messageStop`` (``stopReason``), ``metadata`` (``usage``, ``metrics``), each with a
  ``contentBlockIndex`` where it is about a block; and the exceptions, read as error events.
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_str, json_text, parse_json
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
from freezeframe.providers.parts import FILE, IMAGE, TEXT, THINKING, Part, joined_text
from freezeframe.providers.streams import error_text, index_of, listed

API = "bedrock.converse"


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    messages = memo.read(listed(body.get("messages")), _read_item)
    system = joined_text(_part(block) for block in listed(body.get("system")))
    tools = as_dict(body.get("toolConfig")).get("tools")
    return Prompt(
        model=None,
        stream=False,
        system=system,
        messages=messages,
        tools=tuple(_tool(item) for item in listed(tools)),
    )


def _read_item(item: dict[str, JsonValue]) -> Message:
    return read_message(as_str(item.get("role")) or "user", item.get("content"))


def read_message(role: str, content: JsonValue) -> Message:
    """A message's blocks: tool uses and results taken out, the rest as parts."""
    parts: list[Part] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for block in listed(content):
        use = block.get("toolUse")
        result = block.get("toolResult")
        if isinstance(use, dict):
            calls.append(_call(use))
        elif isinstance(result, dict):
            found = tuple(_part(item) for item in listed(result.get("content")))
            call_id = as_str(result.get("toolUseId"))
            failed = result.get("status") == "error"
            results.append(tool_result(call_id, found, is_error=failed))
        elif "cachePoint" not in block:
            parts.append(_part(block))
    return message(role, tuple(parts), tuple(calls), tuple(results))


def read_answer(whole: dict[str, JsonValue]) -> Message:
    said = as_dict(as_dict(whole.get("output")).get("message"))
    return read_message("assistant", said.get("content"))


def _call(use: dict[str, JsonValue]) -> ToolCall:
    """A ``toolUse`` block; a streamed one's ``input`` is the text its pieces joined to."""
    value = use.get("input")
    arguments = value if isinstance(value, str) else json_text(value)
    return tool_call(as_str(use.get("toolUseId")), as_str(use.get("name")) or "", arguments)


def _part(block: dict[str, JsonValue]) -> Part:
    """One non-tool block as a part (a union: the one member it has says its kind)."""
    text = block.get("text")
    if isinstance(text, str):
        return Part(TEXT, text)
    if "json" in block:
        return Part(TEXT, json_text(block.get("json")))
    reasoning = as_dict(block.get("reasoningContent"))
    if reasoning:
        said = as_str(as_dict(reasoning.get("reasoningText")).get("text"))
        return Part(THINKING, said if said is not None else "(redacted by the provider)")
    for name, kind in (("image", IMAGE), ("document", FILE), ("video", FILE)):
        item = as_dict(block.get(name))
        if item:
            return Part(kind, _attachment(item))
    name = next(iter(block), "unknown")
    return Part(name, json_text(block)[:500])


def _attachment(item: dict[str, JsonValue]) -> str:
    """An image, document or video named by its name, format and where it is."""
    source = as_dict(item.get("source"))
    where = as_str(as_dict(source.get("s3Location")).get("uri"))
    data = as_str(source.get("bytes"))
    if where is None:
        where = f"{len(data.rstrip('=')) * 3 // 4:,} bytes inline" if data else "not named"
    kind = as_str(item.get("format")) or "data"
    name = as_str(item.get("name"))
    return f"{name} ({kind}, {where})" if name else f"{kind}, {where}"


def _tool(item: dict[str, JsonValue]) -> Tool:
    spec = as_dict(item.get("toolSpec"))
    if not spec:
        kind = next(iter(item), FUNCTION)  # a cachePoint or a system tool
        return Tool(kind, kind, None, None)
    schema = as_dict(spec.get("inputSchema")).get("json")
    return Tool(as_str(spec.get("name")) or "", FUNCTION, as_str(spec.get("description")), schema)


class ConverseStream:
    """Content blocks by ``contentBlockIndex``, their text and tool input joined."""

    end_marker = "messageStop"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._role = "assistant"
        self._blocks: dict[int, dict[str, JsonValue]] = {}
        self._pieces: dict[tuple[int, str], list[str]] = {}
        self._tail: dict[str, JsonValue] = {}

    def feed(self, event: dict[str, JsonValue]) -> None:
        if event.get("type") == "error":
            self.error = self.error or error_text(event)
            return
        for kind, payload in event.items():
            self._event(kind, as_dict(payload))

    def _event(self, kind: str, payload: dict[str, JsonValue]) -> None:
        at = index_of(payload.get("contentBlockIndex"), max(len(self._blocks) - 1, 0))
        if kind == "messageStart":
            self._role = as_str(payload.get("role")) or "assistant"
        elif kind == "contentBlockStart":
            use = as_dict(as_dict(payload.get("start")).get("toolUse"))
            if use:
                self._blocks[at] = {"toolUse": dict(use)}
        elif kind == "contentBlockDelta":
            delta = as_dict(payload.get("delta"))
            for field, piece in _delta_pieces(delta):
                self._blocks.setdefault(at, {})
                self._pieces.setdefault((at, field), []).append(piece)
        elif kind == "messageStop":
            self.ended = True
            self._tail["stopReason"] = payload.get("stopReason")
        elif kind == "metadata":
            for name in ("usage", "metrics"):
                if name in payload:
                    self._tail[name] = payload[name]

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        blocks = {at: dict(block) for at, block in self._blocks.items()}
        for (at, field), pieces in self._pieces.items():
            joined = "".join(pieces)
            block = blocks[at]
            if field == "input":
                block["toolUse"] = {**as_dict(block.get("toolUse")), "input": joined}
            elif field in ("reasoning", "signature"):
                reasoning = as_dict(as_dict(block.get("reasoningContent")).get("reasoningText"))
                name = "text" if field == "reasoning" else "signature"
                block["reasoningContent"] = {"reasoningText": {**reasoning, name: joined}}
            else:
                block["text"] = joined
        content: list[JsonValue] = [blocks[at] for at in sorted(blocks)]
        said: dict[str, JsonValue] = {"role": self._role, "content": content}
        return {"output": {"message": said}, **self._tail}


def _delta_pieces(delta: dict[str, JsonValue]) -> list[tuple[str, str]]:
    """(field, text) of a ContentBlockDelta: text, tool input, reasoning or its signature."""
    found: list[tuple[str, str]] = []
    text = delta.get("text")
    if isinstance(text, str):
        found.append(("text", text))
    piece = as_dict(delta.get("toolUse")).get("input")
    if isinstance(piece, str):
        found.append(("input", piece))
    reasoning = as_dict(delta.get("reasoningContent"))
    for name, field in (("text", "reasoning"), ("signature", "signature")):
        value = reasoning.get(name)
        if isinstance(value, str):
            found.append((field, value))
    return found


def tool_input(value: JsonValue) -> JsonValue:
    """A streamed toolUse's input is its joined JSON text: the object it spells."""
    if isinstance(value, str):
        parsed = parse_json(value.encode()) if value else {}
        return parsed if parsed is not None else value
    return value
