"""Tool loops: the same tool asked for again and again with the same arguments.

An agent stuck in a loop asks for one tool with the same arguments turn after turn (the
answer it gets does not move it on), sometimes changing only the spelling: ``"weather in
Paris"``, then ``"Weather in Paris "``. A loop is a run of at least LOOP_MIN calls of one
tool whose arguments are nearly the same: equal once strings are case-folded, their
whitespace collapsed and their leading and trailing punctuation dropped, and null members
left out. Calls of other tools in between do not break a run; a call of the same tool
with other arguments does. Arguments that merely look alike (``a.py`` and ``b.py``) are
different: reading every file of a project is work, not a loop.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass, field

from freezeframe.canonicalize.jsonbody import JsonValue, encode_json
from freezeframe.providers.messages import ToolCall

LOOP_MIN = 3
"""Calls in a run before it is a loop."""

_SPACES = re.compile(r"\s+")
_EDGES = string.punctuation + string.whitespace


@dataclass(frozen=True, slots=True)
class Loop:
    """One tool called again and again with (nearly) the same arguments."""

    tool: str
    count: int
    seqs: tuple[int, ...]
    """The step of each call, in order: the model call that asked for it, or the MCP
    ``tools/call`` no model call asked for (one answer asking for it twice gives its seq
    twice)."""
    arguments: str
    """The first call's arguments."""
    identical: bool
    """Every call's arguments were exactly the same; False when only nearly."""


@dataclass(slots=True)
class _Run:
    exact: str
    near: str
    arguments: str
    seqs: list[int] = field(default_factory=list)
    identical: bool = True


def find_loops(calls: Iterable[tuple[int, ToolCall]]) -> tuple[Loop, ...]:
    """The loops among ``calls`` ((step seq, call), in recorded order), by first call."""
    running: dict[str, _Run] = {}
    found: list[tuple[str, _Run]] = []
    for seq, call in calls:
        exact, near = _keys(call)
        run = running.get(call.name)
        if run is None or run.near != near:
            if run is not None and len(run.seqs) >= LOOP_MIN:
                found.append((call.name, run))
            run = running[call.name] = _Run(exact, near, call.arguments)
        run.seqs.append(seq)
        run.identical = run.identical and exact == run.exact
    found += [(name, run) for name, run in running.items() if len(run.seqs) >= LOOP_MIN]
    found.sort(key=lambda item: item[1].seqs[0])
    return tuple(
        Loop(name, len(run.seqs), tuple(run.seqs), run.arguments, run.identical)
        for name, run in found
    )


def loop_key(call: ToolCall) -> str:
    """The arguments as loops compare them: two calls of one tool with the same loop key
    are nearly the same call (evidence.signatures keeps a digest of it)."""
    return _keys(call)[1]


def _keys(call: ToolCall) -> tuple[str, str]:
    """The arguments exactly (canonical JSON, or the text), and nearly."""
    if call.value is None:
        return call.arguments, _near_text(call.arguments)
    return encode_json(call.value), encode_json(_near(call.value))


def _near(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return _near_text(value)
    if isinstance(value, dict):
        return {name: _near(item) for name, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_near(item) for item in value]
    return value


def _near_text(text: str) -> str:
    return _SPACES.sub(" ", text.casefold()).strip(_EDGES)
