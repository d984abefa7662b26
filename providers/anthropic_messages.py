"""Anthropic Messages: a request, a whole message, or its stream of events.

Shapes, by the SDK types (anthropic 2.x, anthropic/types/):
- message_create_params.py: ``model``, ``system`` (a string or text blocks), ``messages``,
  ``tools``, ``stream``; message_param.py: ``role`` (``user``, ``assistant``, ``system``)
  and ``content`` (a string or blocks).
- tool_use_block_param.py and tool_use_block.py: ``tool_use`` (``id``, ``name``, ``input``:
  an object); tool_result_block_param.py: ``tool_result`` (``tool_use_id``, ``content``: a
  string or blocks, ``is_error``); server_tool_use_block.py and the ``*_tool_result``
  blocks are tools Anthropic runs, kept as parts of their own kind.
- tool_param.py: ``name``, ``description``, ``input_schema``; the server tools
  (``web_search_20250305``...) have a ``type`` and no schema.
- message.py: ``content`` blocks, ``stop_reason``.
- raw_message_stream_event.py: ``message_start`` (the Message, content empty),
  ``content_block_start`` (a block at ``index``), ``content_block_delta`` (raw_content_block_
  delta.py: ``text_delta.text``, ``input_json_delta.partial_json``, ``thinking_delta.
  thinking``, ``signature_delta.signature`` (kept so the block can be streamed again), and
  citation deltas, which add no text), ``content_block_stop``,
  ``message_delta`` (``delta.stop_reason``), ``message_stop``, which ends the stream; and
  ``error``. A ``tool_use`` block starts with ``input: {}`` and its input arrives as
  ``partial_json`` pieces, which the SDK joins and parses at ``content_block_stop``
  (anthropic/lib/streaming/_messages.py); here the joined text is kept as the arguments.
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_str, json_text
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
from freezeframe.providers.parts import Part, content_parts, joined_text, part_of
from freezeframe.providers.streams import error_text, index_of, listed

API = "anthropic.messages"


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    messages = memo.read(listed(body.get("messages")), _read_item)
    system = [joined_text(content_parts(body.get("system")))]
    system += [m.text for m in messages if m.role == "system"]
    return Prompt(
        model=as_str(body.get("model")),
        stream=body.get("stream") is True,
        system="\n".join(text for text in system if text),
        messages=messages,
        tools=tuple(_tool(item) for item in listed(body.get("tools"))),
    )


def read_message(role: str, content: JsonValue) -> Message:
    """A message's blocks: its tool calls and results taken out, the rest as parts."""
    if not isinstance(content, list):
        return message(role, content_parts(content))
    parts: list[Part] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for block in listed(content):
        kind = block.get("type")
        if kind == "tool_use":
            calls.append(_call(block))
        elif kind == "tool_result":
            found = content_parts(block.get("content"))
            call_id = as_str(block.get("tool_use_id"))
            results.append(tool_result(call_id, found, is_error=block.get("is_error") is True))
        else:
            parts.append(part_of(block))
    return message(role, tuple(parts), tuple(calls), tuple(results))


def _read_item(item: dict[str, JsonValue]) -> Message:
    return read_message(as_str(item.get("role")) or "user", item.get("content"))


def read_answer(whole: dict[str, JsonValue]) -> Message:
    return read_message("assistant", whole.get("content") or [])


def _call(block: dict[str, JsonValue]) -> ToolCall:
    """A ``tool_use`` block; a streamed one's ``input`` is the text its pieces joined to."""
    value = block.get("input")
    arguments = value if isinstance(value, str) else json_text(value)
    return tool_call(as_str(block.get("id")), as_str(block.get("name")) or "", arguments)


def _tool(item: dict[str, JsonValue]) -> Tool:
    if "input_schema" in item:
        kind = FUNCTION
    else:
        kind = as_str(item.get("type")) or FUNCTION
    name = as_str(item.get("name")) or kind
    return Tool(name, kind, as_str(item.get("description")), item.get("input_schema"))


class MessagesStream:
    """Content blocks by ``index``, their text and input joined from deltas."""

    end_marker = "message_stop"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._blocks: dict[int, dict[str, JsonValue]] = {}
        self._pieces: dict[tuple[int, str], list[str]] = {}
        self._stopped: set[int] = set()

    def feed(self, event: dict[str, JsonValue]) -> None:
        kind = event.get("type")
        if kind == "content_block_start":
            at = index_of(event.get("index"), len(self._blocks))
            self._blocks[at] = dict(as_dict(event.get("content_block")))
        elif kind == "content_block_delta":
            at = index_of(event.get("index"), len(self._blocks) - 1)
            delta = as_dict(event.get("delta"))
            for name in _DELTA_FIELDS.get(as_str(delta.get("type")) or "", ()):
                piece = delta.get(name)
                if isinstance(piece, str) and piece:
                    self._pieces.setdefault((at, _FIELD_OF.get(name, name)), []).append(piece)
        elif kind == "content_block_stop":
            self._stopped.add(index_of(event.get("index"), len(self._blocks) - 1))
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            self.error = self.error or error_text(event)

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        """A ``tool_use`` block cut off before its first input piece has no input yet: its
        start's ``input: {}`` is a placeholder, the input only once the block stops."""
        blocks = {at: dict(block) for at, block in self._blocks.items()}
        for at, block in blocks.items():
            if block.get("type") == "tool_use" and at not in self._stopped:
                block["input"] = ""
        for (at, name), pieces in self._pieces.items():
            block = blocks.setdefault(at, {"type": "tool_use" if name == "input" else "text"})
            joined = "".join(pieces)
            earlier = block.get(name)
            block[name] = joined if name == "input" else (as_str(earlier) or "") + joined
        return {"content": [blocks[at] for at in sorted(blocks)]}


_DELTA_FIELDS = {
    "text_delta": ("text",),
    "input_json_delta": ("partial_json",),
    "thinking_delta": ("thinking",),
    "signature_delta": ("signature",),
}
"""Which field of each delta carries text, and so is joined."""

_FIELD_OF = {"partial_json": "input"}
"""The block field a delta's pieces make up, where its name differs."""
