"""What a model call is made of, the same for every API: messages, tool calls, tool results.

The provider modules (`providers.openai_chat`, `providers.openai_responses`,
`providers.anthropic_messages`) read their wire shapes into these; everything above them
(conversations, agent steps, and later diff and exports) reads only these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import parse_json
from freezeframe.providers.parts import Part, joined_text

FUNCTION = "function"
"""A tool the client defines and runs, described by a JSON schema of its arguments."""
CUSTOM = "custom"
"""A client tool whose input is free text (OpenAI's custom tools), not JSON arguments."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a model asked for, as it asked: the client is to run it."""

    id: str | None
    """The id the tool's result must carry back (``tool_call_id``, ``call_id``, the
    ``tool_use`` id); None where the API has none (chat's deprecated ``function_call``)."""
    name: str
    arguments: str
    """The arguments as the model wrote them: JSON text for a function tool (a streamed
    answer's pieces joined), free text for a custom tool."""
    value: JsonValue
    """``arguments`` read as JSON; None when they are not JSON (cut off, or free text)."""
    kind: str = FUNCTION


def tool_call(call_id: str | None, name: str, arguments: str, kind: str = FUNCTION) -> ToolCall:
    """A call whose arguments are read as JSON, if they are."""
    value = parse_json(arguments.encode()) if kind == FUNCTION else None
    return ToolCall(call_id, name, arguments, value, kind)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the client sent back to the model as a tool call's result."""

    call_id: str | None
    """The id of the call it answers; None where the API has none."""
    text: str
    """Its text parts, one per line."""
    parts: tuple[Part, ...]
    is_error: bool = False
    """The client marked it as an error (Anthropic's ``is_error``)."""
    name: str | None = None
    """The tool's name, where the API carries it with the result."""


def tool_result(
    call_id: str | None, parts: tuple[Part, ...], *, is_error: bool = False, name: str | None = None
) -> ToolResult:
    return ToolResult(call_id, joined_text(parts), parts, is_error, name)


@dataclass(frozen=True, slots=True)
class Message:
    """One message as the model saw it, in the order it saw them."""

    role: str
    """``system``, ``developer``, ``user``, ``assistant`` or ``tool`` (the API's own word,
    lower case)."""
    text: str
    """Its text parts, one per line."""
    parts: tuple[Part, ...]
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls an assistant message asked for."""
    tool_results: tuple[ToolResult, ...] = ()
    """The results it carries back (a ``tool`` message, or an Anthropic user message)."""


def message(
    role: str,
    parts: tuple[Part, ...],
    tool_calls: tuple[ToolCall, ...] = (),
    tool_results: tuple[ToolResult, ...] = (),
) -> Message:
    return Message(role, joined_text(parts), parts, tool_calls, tool_results)


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the request offered the model."""

    name: str
    kind: str
    """``function``, ``custom``, or a provider-run tool's own type (``web_search``,
    ``web_search_20250305``, ``mcp``...)."""
    description: str | None
    parameters: JsonValue
    """The JSON schema of its arguments; None when it has none."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """What a request put before the model."""

    model: str | None
    stream: bool
    system: str
    """The system prompt: Anthropic's ``system``, Responses' ``instructions``, and the text
    of every system and developer message (which stay in ``messages`` too, where they were),
    one per line."""
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...]
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class MessageMemo:
    """The messages of the last request read, so that the next request of the same run,
    which repeats them before adding its own, reads only what it adds.

    An agent sends the whole conversation with every model call, so reading each request
    anew costs time in the square of the run's length; comparing the repeated messages
    with the ones already read (parsed JSON, compared at C speed) does not.
    """

    _items: list[dict[str, JsonValue]] = field(default_factory=list)
    _messages: tuple[Message, ...] = ()

    def read(
        self, items: list[dict[str, JsonValue]], read_one: Callable[[dict[str, JsonValue]], Message]
    ) -> tuple[Message, ...]:
        """``items`` read one by one with ``read_one``, those the last request had reused."""
        shared = 0
        for before, now in zip(self._items, items, strict=False):
            if before != now:
                break
            shared += 1
        messages = self._messages[:shared] + tuple(read_one(item) for item in items[shared:])
        self._items, self._messages = items, messages
        return messages
