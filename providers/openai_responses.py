"""OpenAI Responses: a list of input items in, a list of output items out, or their events.

The same item shapes go both ways: an agent sends back a response's output items (its
``function_call`` items among them) with a ``function_call_output`` for each call, so one
reader reads a request's ``input`` and an answer's ``output``.

Shapes, by the SDK types (openai 3.x, openai/types/responses/):
- response_create_params.py: ``model``, ``instructions`` (the system prompt), ``input`` (a
  string, or items), ``tools``, ``stream``, ``previous_response_id`` and ``conversation``
  (earlier turns OpenAI holds, which the request does not carry).
- response_input_item_param.py and easy_input_message_param.py: a message item has ``role``
  and ``content`` (a string or input parts), ``type: "message"`` optional;
  response_function_tool_call_param.py: ``function_call`` (``call_id``, ``name``,
  ``arguments``); ``function_call_output`` (``call_id``, ``output``: a string or parts);
  response_custom_tool_call_param.py and response_custom_tool_call_output_param.py: the
  same with ``input`` for free text; response_reasoning_item_param.py: ``reasoning``
  (``summary[].text``, ``content[].text``). Other items (a hosted tool's call, an
  ``item_reference``) are kept as parts of their own kind; those whose type ends in
  ``_output`` are results of the call named by their ``call_id``.
- function_tool_param.py (``name``, ``description``, ``parameters``), custom_tool_param.py;
  other tools (``web_search``, ``mcp``, ``file_search``...) run at OpenAI.
- response.py: ``output`` items as above.
- Stream events (response_stream_event.py): ``response.output_item.added``/``.done`` (the
  item at ``output_index``), ``response.content_part.added``, ``response.output_text.delta``
  and ``response.refusal.delta`` (at ``content_index``),
  ``response.function_call_arguments.delta``/``.done``,
  ``response.custom_tool_call_input.delta``, ``response.reasoning_summary_text.delta`` (at
  ``summary_index``), and ``response.completed``/``.incomplete``/``.failed``, which end the
  stream carrying the whole Response.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

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
    ToolResult,
    message,
    tool_call,
    tool_result,
)
from freezeframe.providers.parts import TEXT, THINKING, Part, content_parts, joined_text, part_of
from freezeframe.providers.streams import error_text, index_of, listed, slot

API = "openai.responses"
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_UNSHOWN_REASONING = "(reasoned; no summary returned)"


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    """``memo`` goes unused: items merge into messages, so they are read whole each time."""
    raw = body.get("input")
    items: list[dict[str, JsonValue]] = [{"role": "user", "content": raw}]
    if not isinstance(raw, str):
        items = listed(raw)
    messages = read_items(items)
    instructions = body.get("instructions")
    written = as_str(instructions)
    if written is None:  # a Response echoes instructions as input items
        written = "\n".join(m.text for m in read_items(listed(instructions))) or None
    system = [written] if written else []
    system += [m.text for m in messages if m.role in _SYSTEM_ROLES]
    notes = []
    previous = as_str(body.get("previous_response_id"))
    if previous:
        notes.append(
            f"continues response {previous}: the turns before it are held by OpenAI and "
            "are not in this request"
        )
    if body.get("conversation") is not None:
        notes.append("belongs to an OpenAI conversation: its earlier turns are not in this request")
    return Prompt(
        model=as_str(body.get("model")),
        stream=body.get("stream") is True,
        system="\n".join(system),
        messages=messages,
        tools=tuple(_tool(item) for item in listed(body.get("tools"))),
        notes=tuple(notes),
    )


def read_answer(whole: dict[str, JsonValue]) -> Message:
    """Every output item, as the one assistant message they make up."""
    parts: list[Part] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for item in read_items(listed(whole.get("output"))):
        parts += item.parts
        calls += item.tool_calls
        results += item.tool_results
    return message("assistant", tuple(parts), tuple(calls), tuple(results))


@dataclass(slots=True)
class _Draft:
    """A message being put together from consecutive items."""

    role: str
    parts: list[Part] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)


def read_items(items: list[dict[str, JsonValue]]) -> tuple[Message, ...]:
    """Items as messages: an assistant's items that follow one another (its reasoning, its
    text, its calls) make one message, as they came from one answer."""
    drafts: list[_Draft] = []

    def assistant() -> _Draft:
        if not drafts or drafts[-1].role != "assistant":
            drafts.append(_Draft("assistant"))
        return drafts[-1]

    for item in items:
        kind = as_str(item.get("type")) or ("message" if "role" in item else "")
        call_id = as_str(item.get("call_id"))
        if kind == "message":
            role = as_str(item.get("role")) or "user"
            draft = assistant() if role == "assistant" else _new(drafts, role)
            draft.parts += content_parts(item.get("content"))
        elif kind == "function_call":
            arguments = as_str(item.get("arguments")) or ""
            assistant().calls.append(tool_call(call_id, _name(item), arguments))
        elif kind == "custom_tool_call":
            text = as_str(item.get("input")) or ""
            assistant().calls.append(tool_call(call_id, _name(item), text, CUSTOM))
        elif kind == "reasoning":
            found = content_parts(item.get("summary")) + content_parts(item.get("content"))
            assistant().parts.append(Part(THINKING, joined_text(found) or _UNSHOWN_REASONING))
        elif kind.endswith("_output"):
            output = item.get("output")
            parts = content_parts(output) if isinstance(output, str | list) else (part_of(item),)
            _new(drafts, "tool").results.append(tool_result(call_id, parts))
        else:
            assistant().parts.append(part_of(item))
    return tuple(message(d.role, tuple(d.parts), tuple(d.calls), tuple(d.results)) for d in drafts)


def _new(drafts: list[_Draft], role: str) -> _Draft:
    drafts.append(_Draft(role))
    return drafts[-1]


def _name(item: dict[str, JsonValue]) -> str:
    return as_str(item.get("name")) or ""


def _tool(item: dict[str, JsonValue]) -> Tool:
    kind = as_str(item.get("type")) or FUNCTION
    name = as_str(item.get("name")) or as_str(item.get("server_label")) or kind
    parameters = item.get("parameters") if kind == FUNCTION else item.get("format")
    return Tool(name, kind, as_str(item.get("description")), parameters)


class ResponsesStream:
    """Output items by ``output_index``, their text and arguments joined from deltas."""

    end_marker = "response.completed, response.incomplete or response.failed"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._items: dict[int, dict[str, JsonValue]] = {}
        self._pieces: dict[tuple[int, str, int, str], list[str]] = {}
        self._final: list[JsonValue] | None = None

    def feed(self, event: dict[str, JsonValue]) -> None:
        kind = as_str(event.get("type")) or ""
        at = index_of(event.get("output_index"), len(self._items))
        if kind in ("response.output_item.added", "response.output_item.done"):
            self._items[at] = dict(as_dict(event.get("item")))
            if kind.endswith(".done"):
                self._drop_pieces(at)
        elif kind == "response.content_part.added":
            place = slot(self._item(at), "content", event.get("content_index"))
            place.update(as_dict(event.get("part")))
        elif kind == "response.output_text.delta":
            self._add((at, "content", index_of(event.get("content_index"), 0), TEXT), event)
        elif kind == "response.refusal.delta":
            self._add((at, "content", index_of(event.get("content_index"), 0), "refusal"), event)
        elif kind == "response.reasoning_summary_text.delta":
            self._add((at, "summary", index_of(event.get("summary_index"), 0), TEXT), event)
        elif kind == "response.function_call_arguments.delta":
            self._add((at, "", 0, "arguments"), event)
        elif kind == "response.custom_tool_call_input.delta":
            self._add((at, "", 0, "input"), event)
        elif kind == "response.function_call_arguments.done":
            self._drop_pieces(at, "arguments")
            self._item(at)["arguments"] = event.get("arguments")
        elif kind in _ENDS:
            self.ended = True
            response = as_dict(event.get("response"))
            output = response.get("output")
            if isinstance(output, list) and output:
                self._final = output
            self.error = self.error or error_text(response)
        elif kind == "error":
            self.error = self.error or error_text(event)

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        if self._final is not None:
            return {"output": self._final}
        items = copy.deepcopy(self._items)  # whole() may be asked again, as more arrives
        for (at, container, index, name), pieces in self._pieces.items():
            item = items.setdefault(at, {})
            place = slot(item, container, index) if container else item
            place[name] = (as_str(place.get(name)) or "") + "".join(pieces)
            if container == "content":
                place.setdefault("type", "refusal" if name == "refusal" else "output_text")
            elif container == "summary":
                place.setdefault("type", "summary_text")
            elif name == "arguments":
                item.setdefault("type", "function_call")
        for item in items.values():
            if item.get("content") and "type" not in item:
                item["type"] = "message"
            if item.get("type") == "message":
                item.setdefault("role", "assistant")
        return {"output": [items[at] for at in sorted(items)]}

    def _item(self, at: int) -> dict[str, JsonValue]:
        return self._items.setdefault(at, {})

    def _add(self, place: tuple[int, str, int, str], event: dict[str, JsonValue]) -> None:
        delta = event.get("delta")
        if isinstance(delta, str) and delta:
            self._pieces.setdefault(place, []).append(delta)

    def _drop_pieces(self, at: int, name: str | None = None) -> None:
        """Forget the deltas an item's ``.done`` event has made whole."""
        for place in [p for p in self._pieces if p[0] == at and name in (None, p[3])]:
            del self._pieces[place]
