"""``edit --set`` on an OpenAI Realtime session: its last response, said differently.

The paths are those of the last response as ``response.done`` carries it whole (a
``RealtimeResponse``, openai/types/realtime/realtime_response.py): ``$.output[i].content[j]
.text`` (or ``.transcript`` for spoken output), ``$.output[i].arguments`` of a function
call, ``$.status``, ``$.usage``. A server that sent its ``response.done`` without ``output``
is read as the deltas put it together (one assistant message with the text that streamed).

The server's events are then rewritten to say the edited response, and nothing else moves:
- the response's first text delta of each kind (``response.output_text.delta``,
  ``response.text.delta``, the audio transcript's deltas) carries the whole new text of its
  part and the later ones of that part are dropped; ``….done`` events carry it whole;
- ``response.function_call_arguments.delta``/``.done`` likewise carry the new arguments;
- ``response.done`` carries the edited response;
- every other message (the client's, audio, other responses') keeps its bytes and its time,
  so the session is re-enacted at its recorded pace. Audio is not re-synthesised: an edited
  spoken answer's transcript changes and its sound does not, which the edit's description
  says.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from freezeframe.providers.bodies import as_dict, as_list, as_str, parse_json
from freezeframe.storage.records import Message

_TEXT = {
    "response.output_text.delta": "text",
    "response.text.delta": "text",
    "response.output_audio_transcript.delta": "transcript",
    "response.audio_transcript.delta": "transcript",
}
_TEXT_DONE = {
    "response.output_text.done": "text",
    "response.text.done": "text",
    "response.output_audio_transcript.done": "transcript",
    "response.audio_transcript.done": "transcript",
}
_AUDIO = ("response.output_audio.delta", "response.audio.delta")
_ARGUMENTS = ("response.function_call_arguments.delta", "response.function_call_arguments.done")


class NotEditable(ValueError):
    """The session has nothing ``--set`` can edit; the message says why."""


def edit_last_response(
    messages: Sequence[Message], change: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[tuple[Message, ...], bool]:
    """The messages with the last response changed by ``change`` (which gets and returns it
    whole), and whether that response had audio, which stays as recorded."""
    events = [_event(m) for m in messages]
    own = None
    for message, event in zip(messages, events, strict=True):
        if not message.from_client and event.get("type") == "response.done":
            own = as_str(as_dict(event.get("response")).get("id"))
    if own is None:
        raise NotEditable("no response.done from the server: the model never finished answering")
    ours = [
        not m.from_client and _response_id(e) == own for m, e in zip(messages, events, strict=True)
    ]
    done = next(
        e
        for m, e, mine in zip(messages, events, ours, strict=True)
        if mine and e.get("type") == "response.done"
    )
    recorded: dict[str, Any] = dict(as_dict(done.get("response")))
    if not as_list(recorded.get("output")):
        recorded["output"] = _output_from_deltas(
            e for e, mine in zip(events, ours, strict=True) if mine
        )
    edited = change(json.loads(json.dumps(recorded)))
    out: list[Message] = []
    sent: set[tuple[str, int, int]] = set()
    audio = False
    for message, event, mine in zip(messages, events, ours, strict=True):
        if not mine:
            out.append(message)
            continue
        kind = as_str(event.get("type")) or ""
        if kind in _AUDIO:
            audio = True
            out.append(message)
            continue
        rewritten = _rewritten(kind, event, edited, sent)
        if rewritten is _DROP:
            continue
        if rewritten is None:
            out.append(message)
        else:
            data = json.dumps(rewritten, ensure_ascii=False).encode("utf-8")
            out.append(dataclasses.replace(message, data=data))
    return tuple(out), audio


_DROP: dict[str, Any] = {}
"""Returned by identity: the event is left out."""


def _rewritten(
    kind: str, event: dict[str, Any], edited: dict[str, Any], sent: set[tuple[str, int, int]]
) -> dict[str, Any] | None:
    """The event as the edited response says it; None to keep it, _DROP to leave it out."""
    output = as_list(edited.get("output"))
    at, part = _index(event.get("output_index")), _index(event.get("content_index"))
    if kind == "response.done":
        return event | {"response": edited}
    if kind in _TEXT or kind in _TEXT_DONE:
        name = _TEXT.get(kind) or _TEXT_DONE[kind]
        content = as_list(as_dict(output[at]).get("content")) if at < len(output) else []
        block = as_dict(content[part]) if part < len(content) else {}
        text = as_str(block.get(name)) or as_str(block.get("text")) or ""
        if kind in _TEXT_DONE:
            return event | {name: text}
        if (kind, at, part) in sent:
            return _DROP
        sent.add((kind, at, part))
        return event | {"delta": text}
    if kind in _ARGUMENTS:
        arguments = as_str(as_dict(output[at]).get("arguments")) if at < len(output) else None
        if arguments is None:
            return None
        if kind.endswith(".done"):
            return event | {"arguments": arguments}
        if (kind, at, 0) in sent:
            return _DROP
        sent.add((kind, at, 0))
        return event | {"delta": arguments}
    return None


def _output_from_deltas(events: Any) -> list[dict[str, Any]]:
    """A response's output as its deltas put it together, for a ``response.done`` without."""
    texts: dict[tuple[int, int, str], list[str]] = {}
    for event in events:
        name = _TEXT.get(as_str(event.get("type")) or "")
        if name is not None:
            place = (_index(event.get("output_index")), _index(event.get("content_index")), name)
            texts.setdefault(place, []).append(as_str(event.get("delta")) or "")
    output: dict[int, dict[str, Any]] = {}
    for (at, part, name), pieces in sorted(texts.items()):
        item = output.setdefault(at, {"type": "message", "role": "assistant", "content": []})
        while len(item["content"]) <= part:
            item["content"].append({"type": "output_text" if name == "text" else "output_audio"})
        item["content"][part][name] = "".join(pieces)
    return [output[at] for at in sorted(output)]


def _event(message: Message) -> dict[str, Any]:
    return as_dict(parse_json(message.data)) if message.text else {}


def _response_id(event: dict[str, Any]) -> str | None:
    return as_str(event.get("response_id")) or as_str(as_dict(event.get("response")).get("id"))


def _index(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
