"""Cohere's Chat API, version 2 (``POST /v2/chat``): request, answer, stream.

Shapes, by Cohere's SDK types (cohere 7.x, cohere/v2/types/ and cohere/types/):
- v2/client.py ``chat``: ``model``, ``messages``, ``tools``, ``stream`` (``chat_stream``).
- chat_message_v2.py: ``system``, ``user``, ``assistant`` and ``tool`` messages, each with
  ``content``, a string or content items (``{"type": "text", "text": ...}``, a tool's
  ``{"type": "document", ...}``); an assistant message may carry ``tool_calls``
  (tool_call_v2.py: ``id``, ``type``, ``function.name``, ``function.arguments`` as JSON
  text) and ``tool_plan``, its reasoning before them; a ``tool`` message answers the call
  named by ``tool_call_id``. These are the shapes of OpenAI's chat messages, read by the
  same reader; the plan is kept as a thinking part.
- tool_v2.py: ``{"type": "function", "function": {name, description, parameters}}``.
- v2chat_response.py: ``id``, ``finish_reason``, ``message`` (an assistant message) and
  ``usage``; its facts (usage, finish reason) are read by `canonicalize.facts`.
- streamed_chat_response_v2.py: ``message-start`` (the id), ``content-start`` and
  ``content-delta`` (``delta.message.content.text``), ``tool-plan-delta``
  (``delta.message.tool_plan``), ``tool-call-start`` (``delta.message.tool_calls``: id,
  name, the arguments begun) and ``tool-call-delta`` (more arguments), by ``index``, then
  ``message-end`` (``delta.finish_reason``, ``delta.usage``, ``delta.error``).
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers import openai_chat
from freezeframe.providers.bodies import as_dict, as_str
from freezeframe.providers.messages import FUNCTION, Message, MessageMemo, Prompt, Tool, message
from freezeframe.providers.parts import THINKING, Part
from freezeframe.providers.streams import error_text, index_of, listed

API = "cohere.chat"


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    messages = memo.read(listed(body.get("messages")), read_message)
    return Prompt(
        model=as_str(body.get("model")),
        stream=body.get("stream") is True,
        system="\n".join(m.text for m in messages if m.role == "system"),
        messages=messages,
        tools=tuple(_tool(item) for item in listed(body.get("tools"))),
    )


def read_message(item: dict[str, JsonValue]) -> Message:
    """One message of a request, or an answer's message: OpenAI chat's shape, and the
    assistant's ``tool_plan`` before its text."""
    read = openai_chat.read_message(item)
    plan = as_str(item.get("tool_plan"))
    if not plan:
        return read
    return message(read.role, (Part(THINKING, plan), *read.parts), read.tool_calls)


def read_answer(whole: dict[str, JsonValue]) -> Message:
    return read_message({"role": "assistant", **as_dict(whole.get("message"))})


def _tool(item: dict[str, JsonValue]) -> Tool:
    function = as_dict(item.get("function"))
    return Tool(
        name=as_str(function.get("name")) or "",
        kind=as_str(item.get("type")) or FUNCTION,
        description=as_str(function.get("description")),
        parameters=function.get("parameters"),
    )


class CohereStream:
    """A Chat v2 stream, put back together as the answer ``chat`` gives unstreamed."""

    end_marker = "a message-end event"

    def __init__(self) -> None:
        self.ended = False
        self.error: str | None = None
        self._id: str | None = None
        self._finish: str | None = None
        self._text: list[str] = []
        self._plan: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}

    def feed(self, event: dict[str, JsonValue]) -> None:
        self.error = self.error or error_text(event)
        kind = event.get("type")
        delta = as_dict(event.get("delta"))
        said = as_dict(delta.get("message"))
        if kind == "message-start":
            self._id = self._id or as_str(event.get("id"))
        elif kind in ("content-start", "content-delta"):
            _add(self._text, as_dict(said.get("content")).get("text"))
        elif kind == "tool-plan-delta":
            _add(self._plan, said.get("tool_plan"))
        elif kind in ("tool-call-start", "tool-call-delta"):
            call = as_dict(said.get("tool_calls"))
            function = as_dict(call.get("function"))
            at = index_of(event.get("index"), len(self._calls))
            pieces = self._calls.setdefault(at, {"id": "", "name": "", "arguments": ""})
            pieces["id"] = pieces["id"] or as_str(call.get("id")) or ""
            pieces["name"] += as_str(function.get("name")) or ""
            pieces["arguments"] += as_str(function.get("arguments")) or ""
        elif kind == "message-end":
            self.ended = True
            self._finish = as_str(delta.get("finish_reason"))
            self.error = self.error or as_str(delta.get("error"))

    def done(self) -> None:
        self.ended = True

    def whole(self) -> dict[str, JsonValue]:
        calls: list[JsonValue] = [
            {
                "id": pieces["id"] or None,
                "type": FUNCTION,
                "function": {"name": pieces["name"], "arguments": pieces["arguments"]},
            }
            for _, pieces in sorted(self._calls.items())
        ]
        text = "".join(self._text)
        said: dict[str, JsonValue] = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}] if text else [],
            "tool_calls": calls,
            "tool_plan": "".join(self._plan) or None,
        }
        return {"id": self._id, "finish_reason": self._finish, "message": said}


def _add(pieces: list[str], piece: JsonValue) -> None:
    if isinstance(piece, str) and piece:
        pieces.append(piece)
