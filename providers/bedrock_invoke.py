"""AWS Bedrock InvokeModel and InvokeModelWithResponseStream: each model's own shapes.

InvokeModel carries the model's native request and answer, so the reader goes by the body:
- Anthropic's Messages (an ``anthropic_version`` such as ``bedrock-2023-05-31``, or
  ``messages`` whose blocks have a ``type``): read by ``anthropic_messages``, its stream's
  chunks being Anthropic's stream events;
- Amazon Nova (``messages`` of Converse-like blocks, ``{"text": ...}`` with no ``type``;
  answers as ``output.message``, streams as ``messageStart``/``contentBlockDelta`` chunks):
  read by ``bedrock_converse``;
- text-completion models: a ``prompt`` (Meta Llama, Mistral, Cohere) or ``inputText``
  (Amazon Titan) in, ``generation``, ``outputs[].text``, ``generations[].text``,
  ``results[].outputText`` or ``completion`` out.

A stream's chunks arrive base64-encoded in ``chunk`` events (``{"bytes": ...}``), which
``canonicalize.eventstream.json_events`` decodes; Bedrock adds
``amazon-bedrock-invocationMetrics`` to the last chunk of every model's stream.
"""

from __future__ import annotations

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers import anthropic_messages, bedrock_converse
from freezeframe.providers.bodies import as_dict, as_list, as_str
from freezeframe.providers.messages import Message, MessageMemo, Prompt, message
from freezeframe.providers.parts import TEXT, Part
from freezeframe.providers.streams import Stream, error_text, listed

API = "bedrock.invoke"
METRICS = "amazon-bedrock-invocationMetrics"


def _is_anthropic(body: dict[str, JsonValue]) -> bool:
    if "anthropic_version" in body:
        return True
    for item in listed(body.get("messages")):
        content = item.get("content")
        if isinstance(content, str) or any("type" in block for block in listed(content)):
            return True
    return False


def read_prompt(body: dict[str, JsonValue], memo: MessageMemo) -> Prompt:
    if "messages" in body:
        if _is_anthropic(body):
            return anthropic_messages.read_prompt(body, memo)
        return bedrock_converse.read_prompt(body, memo)
    text = as_str(body.get("prompt")) or as_str(body.get("inputText")) or ""
    said = (message("user", (Part(TEXT, text),)),) if text else ()
    return Prompt(model=None, stream=False, system="", messages=said, tools=())


def read_answer(whole: dict[str, JsonValue]) -> Message:
    if isinstance(whole.get("content"), list):
        return anthropic_messages.read_answer(whole)
    if "output" in whole:
        return bedrock_converse.read_answer(whole)
    return message("assistant", tuple(Part(TEXT, text) for text in _texts(whole)))


def _texts(answer: dict[str, JsonValue]) -> list[str]:
    """The text of a text-completion model's answer or chunk, whichever field holds it."""
    for name in ("generation", "completion", "outputText"):
        value = answer.get(name)
        if isinstance(value, str):
            return [value]
    for name, field in (("outputs", "text"), ("generations", "text"), ("results", "outputText")):
        found = [as_str(as_dict(item).get(field)) for item in as_list(answer.get(name))]
        if found:
            return [text for text in found if text is not None][:1]
    return []


class InvokeStream:
    """The model's own chunks, handed to its own stream once the first says which it is."""

    end_marker = "the last chunk"

    def __init__(self) -> None:
        self._inner: Stream | None = None
        self._texts: list[str] = []
        self._stop: JsonValue = None
        self._ended = False
        self._error: str | None = None

    @property
    def ended(self) -> bool:
        return self._ended or (self._inner is not None and self._inner.ended)

    @property
    def error(self) -> str | None:
        return self._error or (self._inner.error if self._inner is not None else None)

    @property
    def inner(self) -> Stream | None:
        """The stream of the model's own events, once known."""
        return self._inner

    def feed(self, event: dict[str, JsonValue]) -> None:
        if event.get("type") == "error" and "error" in event and self._inner is None:
            self._error = self._error or error_text(event)
            return
        if self._inner is None and not self._texts:
            if isinstance(event.get("type"), str):
                self._inner = anthropic_messages.MessagesStream()
            elif any(name in event for name in CONVERSE_EVENTS):
                self._inner = bedrock_converse.ConverseStream()
        if self._inner is not None:
            self._inner.feed({k: v for k, v in event.items() if k != METRICS})
        else:
            self._texts += _texts(event)
            for name in ("stop_reason", "completionReason", "finish_reason"):
                if event.get(name):
                    self._stop = event[name]
        if METRICS in event:
            self._ended = True

    def done(self) -> None:
        self._ended = True

    def whole(self) -> dict[str, JsonValue]:
        if self._inner is not None:
            return self._inner.whole()
        whole: dict[str, JsonValue] = {"generation": "".join(self._texts)}
        if self._stop is not None:
            whole["stop_reason"] = self._stop
        return whole


CONVERSE_EVENTS = ("messageStart", "contentBlockStart", "contentBlockDelta", "messageStop")
"""The chunks that open an Amazon Nova stream (Converse's events, one a chunk)."""
