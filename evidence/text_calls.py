"""Tool calls an agent writes back into the conversation as text, and the results after them.

smolagents keeps its own memory of a run and sends it to the model as plain messages. The
model's answer asks for tools natively (``tool_calls`` with ids), but the next request does
not echo them as an assistant message's ``tool_calls`` with ``tool`` messages after it:
it writes them as the assistant's text, ``Calling tools:`` and the calls as Python prints a
list of dicts (``[{'id': 'call_…', 'type': 'function', 'function': {'name': …,
'arguments': …}}]``), after the model's own words when it had any, and the results as the
user's text, ``Observation:`` and every call's output (``Call id: …`` and ``Error:`` when a
tool failed). Such a request carries back the results of the calls it names, by their ids:
what the agent-steps reader links each call's result to (evidence.steps).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from freezeframe.providers.messages import Message

__all__ = ["CALLING", "carried_as_text"]

CALLING = "Calling tools:\n"
"""What opens the calls written as text (smolagents' ``ActionStep.to_messages``)."""
_RESULTS = ("Observation:", "Call id: ", "Error:")
"""How the user message that carries their results opens: the outputs, or a tool's error."""
_MAX_LIST = 1 << 20
"""Characters of a written list read at most: anything longer is left unread."""


def carried_as_text(messages: Sequence[Message]) -> dict[str, str]:
    """The ids of the calls ``messages`` wrote as text and answered right after, each with
    why, in the words a person checking the request would look for."""
    carried: dict[str, str] = {}
    for message, after in zip(messages, messages[1:], strict=False):
        if message.role != "assistant" or after.role != "user":
            continue
        opening = next((o for o in _RESULTS if after.text.lstrip().startswith(o)), None)
        if opening is None:
            continue
        for call_id in _written_ids(message.text):
            carried.setdefault(call_id, f"{CALLING.strip()} {call_id}, then {opening.strip()}")
    return carried


def _written_ids(text: str) -> list[str]:
    """The ids of the calls the last ``Calling tools:`` of ``text`` lists; none when it has
    none or they cannot be read (a list cut off, or not Python's own printing)."""
    at = text.rfind(CALLING)
    if at < 0:
        return []
    written = text[at + len(CALLING) :].split("\n", 1)[0]
    if len(written) > _MAX_LIST:
        return []
    try:
        calls = ast.literal_eval(written)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return []
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]
