"""A recorded run as the agent lived it: model calls, the tools they asked for, and the
traffic that ran those tools, derived from the traffic alone.

Every exchange is one step, in recorded (``seq``) order, so nothing is hidden or moved:
traffic that links to nothing stays where it happened. A model call's step holds the tool
calls its answer asked for, each linked

- to the exchange that ran it, when one is found between the answer and the model request
  that carried the call's result (or, when none did, the next model request): an MCP
  ``tools/call`` with the same name and the same arguments is an **exact** link; one whose
  name ends with the call's or whose arguments hold the call's, and any other request that
  carried the call's argument values in its path, query or body, is **inferred** from the
  time window and that content, and says which content matched. A request that started
  before the answer began to arrive cannot have been asked for by it. Each exchange runs at
  most one call and each call is run by at most one exchange, the best match winning;
- to the first later model request that carried its result back, by the result's
  ``tool_call_id`` / ``call_id`` / ``tool_use_id``, or by the id named in the calls an
  agent wrote back as text with their results after them (smolagents' ``Calling tools:``
  then ``Observation:``, evidence.text_calls): always an **exact** link, as ids are
  minted per call. Where the API gives the call no id (Gemini's ``functionCall`` without
  ``id``, Chat's deprecated ``function_call``), the results after the call's message are
  paired with its calls the way the API pairs them: by name, in order, within the turn (the
  second ``get_weather`` response answers the second ``get_weather`` call), in the first
  later request whose history holds that message (the same calls, same arguments) with the
  call answered. That is **exact** too: it is the API's own pairing.

A Realtime session is one exchange (its WebSocket) holding many responses: its step holds
the calls of them all, and each result it sent back over the same WebSocket (a
``function_call_output`` with the call's ``call_id``) links to the session's own step.

Loops (one tool asked for again and again with nearly the same arguments) are reported
beside the steps; see `evidence.loops`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from freezeframe.canonicalize.jsonbody import JsonValue, encode_json
from freezeframe.canonicalize.profiles.telemetry import telemetry_profile
from freezeframe.evidence.conversation import (
    Conversation,
    context_document,
    conversations_of,
    part_document,
    tool_call_document,
    tool_result_document,
)
from freezeframe.evidence.loops import Loop, find_loops
from freezeframe.evidence.matching import RequestContent, content_match, request_content
from freezeframe.evidence.text_calls import carried_as_text
from freezeframe.providers.bodies import parse_json, response_body
from freezeframe.providers.mcp import McpMessage, mcp_of
from freezeframe.providers.messages import Message, ToolCall
from freezeframe.providers.realtime import API as REALTIME
from freezeframe.providers.streams import error_text
from freezeframe.storage import Exchange, Outcome

MODEL = "model"
MCP = "mcp"
HTTP = "http"
_NAME_SEPARATORS = ("__", "_", ".", "-", "/", ":")
"""What agents put between a server's name and an MCP tool's (``mcp__files__read``)."""


class Match(StrEnum):
    EXACT = "exact"
    """Ids match (or, where the API gives none, the name in order within the turn, as the
    API pairs them), or an MCP tool's name and arguments are the call's own."""
    INFERRED = "inferred"
    """The time window and the content match; ``why`` says which content."""


@dataclass(frozen=True, slots=True)
class Link:
    """A requested tool call's link to another step."""

    seq: int
    """The step at the other end."""
    match: Match
    why: str
    """What matched, for people: an id, a name and arguments, the content found."""


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """A tool call a model's answer asked for, and where it went."""

    call: ToolCall
    executed_by: Link | None
    """The exchange that ran it; None when none is found (a tool that uses no network,
    or traffic freezeframe did not see)."""
    result_in: Link | None
    """The model request that carried its result; None when no later one did."""


@dataclass(frozen=True, slots=True)
class Executes:
    """The requested call that an exchange ran: the other end of ``executed_by``."""

    seq: int
    """The model call whose answer asked for it."""
    call: int
    """Its place among that answer's tool calls."""
    match: Match
    why: str


@dataclass(frozen=True, slots=True)
class Step:
    """One exchange of the run, read for what it did."""

    seq: int
    kind: str
    """``model`` (a model call), ``mcp`` (an MCP message) or ``http`` (anything else)."""
    method: str
    url: str
    status: int | None
    """The HTTP status; None when no answer came."""
    outcome: str
    """How the exchange ended (storage.Outcome): complete, truncated, failed, incomplete."""
    started_at: float
    duration: float | None
    title: str
    """One line for a list, for people (never parsed)."""
    conversation: Conversation | None
    """A model call's conversation."""
    calls: tuple[RequestedCall, ...]
    """A model call's requested tool calls, in the order its answer gave them."""
    mcp: McpMessage | None
    """An MCP message: its method, and a ``tools/call``'s call and result."""
    executes: Executes | None
    """The requested call this exchange ran, when it ran one."""
    failure: str | None = None
    """Why the step failed, in one line: an error status and the error the answer carried,
    an answer cut off or never come, an MCP tool's error result; None when it did not."""

    @property
    def linked(self) -> bool:
        """A model call, or an exchange that ran a requested call."""
        return self.kind == MODEL or self.executes is not None


@dataclass(frozen=True, slots=True)
class Steps:
    steps: tuple[Step, ...]
    """Every exchange given, in recorded order."""
    loops: tuple[Loop, ...]


@dataclass(frozen=True, slots=True)
class _Read:
    exchange: Exchange
    conversation: Conversation | None
    mcp: McpMessage | None


@dataclass(frozen=True, slots=True)
class _Request:
    """A requested call while links are worked out."""

    model: int
    """The position of the model step that asked."""
    index: int
    call: ToolCall
    result_in: Link | None
    window: range
    """Positions of the steps that may have run it."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    rank: tuple[int, int, int, int, int, int]
    """Exact first; then an MCP call, a body that is the arguments, other content; then
    more argument values found whole, then more found at all; then nearer the answer; then
    the earlier call."""
    request: int
    position: int
    match: Match
    why: str


def agent_steps(exchanges: Iterable[Exchange]) -> Steps:
    """The steps of a run: its exchanges (any order; one cassette or run) read and linked."""
    ordered = sorted(exchanges, key=lambda e: e.seq)
    reads = [
        _Read(exchange, conversation, None if conversation else mcp_of(exchange))
        for exchange, conversation in zip(ordered, conversations_of(ordered), strict=True)
    ]
    seqs = [read.exchange.seq for read in reads]
    requests = list(_requests(reads, seqs))
    executions = _assign(reads, requests)
    by_model: dict[int, list[RequestedCall]] = {}
    executes: dict[int, Executes] = {}
    for number, request in enumerate(requests):
        found = executions.get(number)
        link = None
        if found is not None:
            position, match, why = found
            link = Link(seqs[position], match, why)
            executes[position] = Executes(seqs[request.model], request.index, match, why)
        by_model.setdefault(request.model, []).append(
            RequestedCall(request.call, link, request.result_in)
        )
    steps = tuple(
        _step(read, tuple(by_model.get(position, ())), executes.get(position))
        for position, read in enumerate(reads)
    )
    return Steps(steps, find_loops(_tool_calls(steps)))


def _requests(reads: list[_Read], seqs: list[int]) -> Iterator[_Request]:
    """Every tool call the answers asked for, with its result link and its window."""
    models = [p for p, read in enumerate(reads) if read.conversation is not None]
    carriers: dict[str, list[int]] = {}
    as_text: dict[tuple[str, int], str] = {}
    """(call id, position) -> why, for the results a request carried back as text."""
    turns: dict[tuple[str, ...], list[tuple[int, dict[int, str]]]] = {}
    for position in models:
        conversation = reads[position].conversation
        assert conversation is not None
        written = carried_as_text(conversation.messages)
        ids = [r.call_id for r in conversation.tool_results() if r.call_id]
        for call_id in (*ids, *written):
            found = carriers.setdefault(call_id, [])
            if not found or found[-1] != position:
                found.append(position)
        for call_id, why in written.items():
            as_text[(call_id, position)] = why
        field = _result_name(conversation)
        for calls, answered in _named_turns(conversation.messages, field):
            found_turns = turns.setdefault(_signature(calls), [])
            if found_turns and found_turns[-1][0] == position:
                found_turns[-1] = (position, answered | found_turns[-1][1])
            else:
                found_turns.append((position, answered))
    for number, position in enumerate(models):
        conversation = reads[position].conversation
        assert conversation is not None
        following = models[number + 1] if number + 1 < len(models) else len(reads)
        calls = _asked(conversation)
        named = turns.get(_signature(calls), [])
        for index, call in enumerate(calls):
            result_in = None
            end = following
            if call.id:
                carrier = _first_after(carriers.get(call.id, []), position)
                if conversation.api == REALTIME and position in carriers.get(call.id, []):
                    carrier = position  # the session sent the result back itself
                why = f"{_id_name(conversation)} {call.id}"
                if carrier is not None:
                    why = as_text.get((call.id, carrier), why)
            else:
                carrier, why = _answered_by_name(named, position, index)
            if carrier is not None:
                result_in = Link(seqs[carrier], Match.EXACT, why)
                end = carrier if carrier > position else following  # a session: after it
            yield _Request(position, index, call, result_in, range(position + 1, end))


def _asked(conversation: Conversation) -> tuple[ToolCall, ...]:
    """The tool calls a model call asked for: its answer's; for a Realtime session, every
    response's, as the session went on after each call (its last response is the answer)."""
    asked = conversation.answer.tool_calls if conversation.answer is not None else ()
    if conversation.api != REALTIME:
        return asked
    earlier = (
        call for m in conversation.messages if m.role == "assistant" for call in m.tool_calls
    )
    return (*earlier, *asked)


def _first_after(positions: list[int], position: int) -> int | None:
    at = bisect.bisect_right(positions, position)
    return positions[at] if at < len(positions) else None


def _named_turns(
    messages: tuple[Message, ...], field: str
) -> Iterator[tuple[tuple[ToolCall, ...], dict[int, str]]]:
    """Each message of calls without ids, with the results the messages after it (up to the
    next assistant message) carried back: call index -> why, paired by name in order."""
    calls: tuple[ToolCall, ...] = ()
    answered: dict[int, str] = {}
    waiting: dict[str, list[int]] = {}
    for message in (*messages, None):
        if message is None or message.role == "assistant":
            if answered:
                yield calls, answered
            calls = message.tool_calls if message is not None else ()
            answered = {}
            waiting = {}
            for index, call in enumerate(calls):
                if not call.id:
                    waiting.setdefault(call.name, []).append(index)
            continue
        for result in message.tool_results:
            queue = waiting.get(result.name or "") if not result.call_id else None
            if queue:
                index = queue.pop(0)
                answered[index] = _by_name(field, result.name or "", calls, index)


def _by_name(field: str, name: str, calls: tuple[ToolCall, ...], index: int) -> str:
    """Why a result answers the call at ``index``, in the API's words."""
    same = [n for n, call in enumerate(calls) if call.name == name and not call.id]
    if len(same) == 1:
        return f"{field} {name} (by name; the call has no id)"
    return f"{field} {name} ({same.index(index) + 1} of {len(same)} by that name, in order; no ids)"


def _signature(calls: tuple[ToolCall, ...]) -> tuple[str, ...]:
    """A message's calls as names and canonical arguments: the answer a later request's
    history repeats."""
    return tuple(f"{call.name}\n{_canonical(call.value, call.arguments)}" for call in calls)


def _answered_by_name(
    turns: list[tuple[int, dict[int, str]]], position: int, index: int
) -> tuple[int | None, str]:
    """The first request after ``position`` that answered call ``index`` by name, and why."""
    for carrier, answered in turns:
        if carrier > position and index in answered:
            return carrier, answered[index]
    return None, ""


def _id_name(conversation: Conversation) -> str:
    """The field that carries the call's id back, in this API's words."""
    if conversation.api in ("openai.responses", REALTIME):
        return "call_id"
    if conversation.api in ("anthropic.messages", "bedrock.invoke"):
        return "tool_use_id"
    if conversation.api == "bedrock.converse":
        return "toolUseId"
    if conversation.api == "gemini.generate-content":
        return "functionResponse id"
    return "tool_call_id"


def _result_name(conversation: Conversation) -> str:
    """What carries a result back by its call's name, in this API's words."""
    if conversation.api == "gemini.generate-content":
        return "functionResponse"
    return "function message"


def _assign(reads: list[_Read], requests: list[_Request]) -> dict[int, tuple[int, Match, str]]:
    """Request number -> (position, match, why): best candidates first, each used once."""
    contents: dict[int, RequestContent] = {}
    candidates: list[_Candidate] = []
    for number, request in enumerate(requests):
        model = reads[request.model].exchange
        began = model.recorded.started_at
        if (
            model.recorded.response is not None
            and model.recorded.response.first_byte_at is not None
        ):
            began += model.recorded.response.first_byte_at
        for position in request.window:
            read = reads[position]
            if read.conversation is not None or read.exchange.recorded.started_at < began:
                continue
            if telemetry_profile(read.exchange.recorded.path.split("?", 1)[0]) is not None:
                continue  # a trace upload carries the call's values; it never runs a tool
            distance = position - request.model
            if read.mcp is not None:
                if read.mcp.call is not None:
                    found = _mcp_match(request.call, read.mcp.call)
                    if found is not None:
                        match, score, why = found
                        rank = (0 if match is Match.EXACT else 1, 0, -score, 0, distance, number)
                        candidates.append(_Candidate(rank, number, position, match, why))
                continue
            if position not in contents:
                contents[position] = request_content(read.exchange)
            call = request.call
            content = content_match(
                call.arguments if call.value is None else call.value, contents[position]
            )
            if content is not None:
                why = f"{content.why}, {_after(model, read.exchange)}"
                how = 1 if content.whole_body else 2
                rank = (1, how, -content.whole_values, -content.found, distance, number)
                candidates.append(_Candidate(rank, number, position, Match.INFERRED, why))
    chosen: dict[int, tuple[int, Match, str]] = {}
    used: set[int] = set()
    for candidate in sorted(candidates, key=lambda c: c.rank):
        if candidate.request not in chosen and candidate.position not in used:
            chosen[candidate.request] = (candidate.position, candidate.match, candidate.why)
            used.add(candidate.position)
    return chosen


def _mcp_match(call: ToolCall, mcp: ToolCall) -> tuple[Match, int, str] | None:
    """(match, score, why) of an MCP ``tools/call`` running ``call``; None when it did not."""
    same_name = call.name == mcp.name
    if not same_name and not _namespaced(call.name, mcp.name):
        return None
    asked, sent = _canonical(call.value, call.arguments), _canonical(mcp.value, mcp.arguments)
    if asked == sent:
        if same_name:
            return Match.EXACT, 3, f"tools/call {mcp.name} with the same arguments"
        why = f"tools/call {mcp.name} (the model's {call.name}) with the same arguments"
        return Match.INFERRED, 2, why
    if _within(call.value, mcp.value):
        return Match.INFERRED, 1, f"tools/call {mcp.name} with the call's arguments among others"
    return None


def _namespaced(asked: str, tool: str) -> bool:
    """The model's name for a tool is the MCP tool's name behind a server's prefix."""
    return bool(tool) and any(asked.endswith(separator + tool) for separator in _NAME_SEPARATORS)


def _canonical(value: JsonValue, text: str) -> str:
    return text if value is None else encode_json(value)


def _within(asked: JsonValue, sent: JsonValue) -> bool:
    """Every member the model wrote is in what was sent, with the same value."""
    if not isinstance(asked, dict) or not isinstance(sent, dict) or not asked:
        return False
    return all(
        name in sent and encode_json(value) == encode_json(sent[name])
        for name, value in asked.items()
    )


def _after(model: Exchange, tool: Exchange) -> str:
    if model.recorded.duration is None:
        return "after the answer began"
    gap = tool.recorded.started_at - (model.recorded.started_at + model.recorded.duration)
    if gap < 0:
        return "while the answer was still arriving"
    return f"{gap * 1000:.0f} ms after the answer ended"


def _step(read: _Read, calls: tuple[RequestedCall, ...], executes: Executes | None) -> Step:
    exchange = read.exchange
    kind = MODEL if read.conversation else MCP if read.mcp else HTTP
    return Step(
        seq=exchange.seq,
        kind=kind,
        method=exchange.recorded.method,
        url=exchange.url,
        status=exchange.recorded.response.status if exchange.recorded.response else None,
        outcome=exchange.recorded.outcome.value,
        started_at=exchange.recorded.started_at,
        duration=exchange.recorded.duration,
        title=_title(read, calls),
        conversation=read.conversation,
        calls=calls,
        mcp=read.mcp,
        executes=executes,
        failure=failure_of(read.exchange, read.conversation, read.mcp),
    )


_BROKEN = {
    Outcome.TRUNCATED: "cut off",
    Outcome.FAILED: "no answer",
    Outcome.INCOMPLETE: "in flight when the proxy stopped",
}
FAILURE_SHOWN = 200
"""Characters of an error's text a step shows."""


def failure_of(
    exchange: Exchange, conversation: Conversation | None, mcp: McpMessage | None
) -> str | None:
    """Why an exchange failed, for a person reading the run; None when it did not."""
    response = exchange.recorded.response
    said = None
    if conversation is not None and conversation.answer is not None:
        said = conversation.answer.error
    elif response is not None and response.status >= 400:
        body = response_body(exchange)
        said = error_text(parse_json(body.data)) if body is not None and body.data else None
    if mcp is not None and mcp.result is not None and mcp.result.is_error:
        said = said or f"the tool answered an error: {mcp.result.text}"
    broken = _BROKEN.get(exchange.recorded.outcome)
    if broken is not None:
        why = f"{broken}: {exchange.recorded.error}" if exchange.recorded.error else broken
        return _cut(f"{why}{f' ({said})' if said else ''}")
    if response is not None and response.status >= 400:
        return _cut(f"HTTP {response.status}{f': {said}' if said else ''}")
    if said:
        return _cut(said)
    return None


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= FAILURE_SHOWN else line[: FAILURE_SHOWN - 1] + "…"


def _title(read: _Read, calls: tuple[RequestedCall, ...]) -> str:
    conversation, mcp, exchange = read.conversation, read.mcp, read.exchange
    if conversation is not None:
        who = conversation.model or conversation.api
        if conversation.answer is None:
            return f"{who}: no answer"
        if calls:
            return f"{who} asks for {', '.join(c.call.name for c in calls)}"
        text = " ".join(conversation.answer.text.split())
        return f"{who} answers" + (f": {text[:80]}" if text else "")
    if mcp is not None:
        if mcp.resumed_after is not None:
            return f"MCP {mcp.method} after event {mcp.resumed_after}"
        return f"MCP {mcp.method}" + (f" {mcp.call.name}" if mcp.call else "")
    return f"{exchange.recorded.method} {exchange.url}"


def _tool_calls(steps: tuple[Step, ...]) -> Iterator[tuple[int, ToolCall]]:
    """Every tool call of the run once: those models asked for, and MCP calls none did."""
    for step in steps:
        for requested in step.calls:
            yield step.seq, requested.call
        if step.mcp is not None and step.mcp.call is not None and step.executes is None:
            yield step.seq, step.mcp.call


def steps_document(steps: Steps) -> dict[str, Any]:
    """The steps as one JSON-ready document. A model step carries a summary of its
    conversation; ``conversation_document`` gives one whole."""
    return {
        "steps": [step_document(step) for step in steps.steps],
        "loops": [
            {
                "tool": loop.tool,
                "count": loop.count,
                "seqs": list(loop.seqs),
                "arguments": loop.arguments,
                "identical": loop.identical,
            }
            for loop in steps.loops
        ],
    }


def step_document(step: Step) -> dict[str, Any]:
    return {
        "seq": step.seq,
        "kind": step.kind,
        "title": step.title,
        "method": step.method,
        "url": step.url,
        "status": step.status,
        "outcome": step.outcome,
        "started_at": step.started_at,
        "duration": step.duration,
        "linked": step.linked,
        "failure": step.failure,
        "model": None if step.conversation is None else _model_summary(step.conversation),
        "calls": [
            {
                "call": tool_call_document(requested.call),
                "executed_by": _link(requested.executed_by),
                "result_in": _link(requested.result_in),
            }
            for requested in step.calls
        ],
        "mcp": None if step.mcp is None else _mcp_document(step.mcp),
        "executes": None
        if step.executes is None
        else {
            "seq": step.executes.seq,
            "call": step.executes.call,
            "match": step.executes.match.value,
            "why": step.executes.why,
        },
    }


def _model_summary(conversation: Conversation) -> dict[str, Any]:
    answer = conversation.answer
    return {
        "provider": conversation.provider,
        "api": conversation.api,
        "model": conversation.model,
        "answered_model": None if answer is None else answer.model,
        "stream": conversation.stream,
        "messages": len(conversation.messages),
        "text": None if answer is None else answer.text,
        "parts": [] if answer is None else [part_document(p) for p in answer.parts],
        "finish_reason": None if answer is None else answer.finish_reason,
        "complete": None if answer is None else answer.complete,
        "error": None if answer is None else answer.error,
        "usage": {} if answer is None else dict(answer.usage),
        "context": None if conversation.context is None else context_document(conversation.context),
        "notes": list(conversation.notes),
    }


def _link(link: Link | None) -> dict[str, Any] | None:
    if link is None:
        return None
    return {"seq": link.seq, "match": link.match.value, "why": link.why}


def _mcp_document(mcp: McpMessage) -> dict[str, Any]:
    return {
        "method": mcp.method,
        "call": None if mcp.call is None else tool_call_document(mcp.call),
        "result": None if mcp.result is None else tool_result_document(mcp.result),
        "session": mcp.session,
        "resumed_after": mcp.resumed_after,
    }
