"""Two runs of an agent, side by side: where they part, and how each step differs.

A what-if ends in a comparison: the run that went wrong against the run with the fix. Both
are read as agent steps (evidence.steps) and aligned step by step: model calls by their
position among model calls, tool calls and other traffic by what they called (method, host
and path, or an MCP tool's name), so an edited tool answer lines up with the original and a
step one run took and the other did not stands alone.

Each aligned pair says what differs in the request (the JSON paths of its canonical form: the
prompt that changed), in the answer (a model's text, the tool calls it chose and their
arguments, its finish reason; a tool's status and body paths), and in the metadata that does
not change behaviour (model snapshot, ``system_fingerprint``, usage, timing). The runs
*diverge* at the first step whose request or answer differs in what it says, or that one run
has and the other has not; metadata alone never makes runs differ.

The ids a model makes up on every call (``chatcmpl-…``, ``call_…`` and the ``tool_call_id``
that echoes it, ``resp_…``, ``msg_…``, ``toolu_…``) are compared by their role
(evidence.model_ids): a faithful re-run, whose ids map one to one onto the recording's, is
equivalent, and the ids that differ are listed with the metadata. A path differs only when it
differs both as stored and as read by role: bytes copied into an edited fork are the same
even where the fork's edited answer no longer mints the id they echo. ``strict`` compares them
byte for byte instead, as answer differences. The ids of model steps aligned with each other
are also paired (evidence.response_ids), so an OpenAI Responses step that ran live shows
which ``resp_…`` and item ids stood for the recorded ones (``response id``, ``output[i]
id``), and a tool call whose path names such an id aligns with the recorded one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from freezeframe.canonicalize import Difference
from freezeframe.canonicalize.diff import differences, json_differences
from freezeframe.evidence.model_ids import IdRoles, minted_ids
from freezeframe.evidence.response_ids import IdMap, Minted, answer_ids, pair_ids
from freezeframe.evidence.steps import MODEL, Step, agent_steps
from freezeframe.providers.bodies import media_type, response_body
from freezeframe.storage import Exchange, ExchangeFilter, Outcome, ReadStore
from freezeframe.storage.names import validate_cassette_name

type _Readers = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]
"""How run A's and run B's bytes are read: their model-made ids as roles."""

SHOWN = 120
"""Characters of a value shown in a difference."""


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: where, and the value in run A and in run B."""

    what: str
    a: str
    b: str


@dataclass(frozen=True, slots=True)
class StepPair:
    """A step of run A and the step of run B it aligns with (None: that run has none)."""

    a: int | None
    """The step's seq in run A."""
    b: int | None
    kind: str
    title: str
    request: tuple[Change, ...] = ()
    answer: tuple[Change, ...] = ()
    metadata: tuple[Change, ...] = ()
    """Differences that do not change behaviour: snapshot, fingerprint, usage, ids."""
    timing: tuple[Change, ...] = ()

    @property
    def diverges(self) -> bool:
        return self.a is None or self.b is None or bool(self.request or self.answer)


@dataclass(frozen=True, slots=True)
class RunDiff:
    a: str
    b: str
    steps: tuple[StepPair, ...]

    @property
    def first_divergence(self) -> int | None:
        """The index in ``steps`` of the first pair that diverges."""
        return next((n for n, pair in enumerate(self.steps) if pair.diverges), None)

    @property
    def equivalent(self) -> bool:
        return self.first_divergence is None


def compare_runs(
    a_name: str,
    a: Sequence[Exchange],
    b_name: str,
    b: Sequence[Exchange],
    *,
    strict: bool = False,
) -> RunDiff:
    """Align the runs ``a`` and ``b`` (their exchanges, in recorded order) step by step;
    model-made ids are read by their role unless ``strict``."""
    a_steps, b_steps = agent_steps(a).steps, agent_steps(b).steps
    roles = None if strict else (IdRoles(a), IdRoles(b))
    a_by_seq = {exchange.seq: exchange for exchange in a}
    b_by_seq = {exchange.seq: exchange for exchange in b}
    ids = _minted_ids(a_steps, b_steps, a_by_seq, b_by_seq)
    matcher = difflib.SequenceMatcher(
        a=_signatures(a_steps), b=_signatures(b_steps, ids), autojunk=False
    )
    pairs: list[StepPair] = []
    for tag, a_from, a_to, b_from, b_to in matcher.get_opcodes():
        if tag == "equal":
            for left, right in zip(a_steps[a_from:a_to], b_steps[b_from:b_to], strict=True):
                pairs.append(_pair(left, right, a_by_seq[left.seq], b_by_seq[right.seq], roles))
            continue
        pairs += [_alone(step, in_a=True) for step in a_steps[a_from:a_to]]
        pairs += [_alone(step, in_a=False) for step in b_steps[b_from:b_to]]
    return RunDiff(a_name, b_name, tuple(pairs))


def read_run(store: ReadStore, spec: str) -> list[Exchange]:
    """The exchanges of ``CASSETTE`` or ``CASSETTE@RUN_ID``, whole, in recorded order (a
    cassette may have '@' in its name: the whole text is tried as a name first). Raises
    ValueError for a run the cassette does not have, CassetteNotFound for no cassette."""
    cassette, run = spec, None
    if "@" in spec and not store.has_cassette(spec):
        cassette, _, run = spec.rpartition("@")
    validate_cassette_name(cassette)
    where = ExchangeFilter.parse(run_id=run) if run else None
    rows = store.exchanges(cassette, where)
    if run and not rows:
        raise ValueError(f"{spec}: cassette {cassette!r} has no exchange of run {run!r}")
    return [store.exchange(cassette, row.seq) for row in rows]


def diff_document(diff: RunDiff) -> dict[str, Any]:
    """The JSON of a comparison (``diff --json``, the admin API)."""
    first = diff.first_divergence
    return {
        "a": diff.a,
        "b": diff.b,
        "equivalent": diff.equivalent,
        "first_divergence": None if first is None else first,
        "steps": [asdict(pair) | {"diverges": pair.diverges} for pair in diff.steps],
    }


def _minted_ids(
    a_steps: Sequence[Step],
    b_steps: Sequence[Step],
    a_by_seq: dict[int, Exchange],
    b_by_seq: dict[int, Exchange],
) -> IdMap:
    """Run B's minted ids and the run A ids they stand for, from the model steps at the same
    position among model calls (as they are aligned)."""
    ids = IdMap()
    a_models = [step for step in a_steps if step.kind == MODEL]
    b_models = [step for step in b_steps if step.kind == MODEL]
    for left, right in zip(a_models, b_models, strict=False):
        ids.learn(pair_ids(_answer_ids(a_by_seq[left.seq]), _answer_ids(b_by_seq[right.seq])))
    return ids


def _answer_ids(exchange: Exchange) -> Minted:
    body = response_body(exchange)
    if body is None or exchange.recorded.response is None:
        return ()
    return answer_ids(body.data, media_type(exchange.recorded.response.headers))


def _signatures(steps: Sequence[Step], ids: IdMap | None = None) -> list[tuple[str, ...]]:
    """What a step is aligned by: a model call by its position among model calls; anything
    else by what it called (in run B, with its minted ids read as run A's)."""
    signatures: list[tuple[str, ...]] = []
    models = 0
    for step in steps:
        if step.kind == MODEL:
            signatures.append((MODEL, str(models)))
            models += 1
        elif step.mcp is not None and step.mcp.call is not None:
            signatures.append(("mcp", step.mcp.call.name))
        else:
            parts = urlsplit(step.url)
            path = ids.to_recorded(parts.path) if ids is not None else parts.path
            signatures.append((step.kind, step.method, parts.netloc, path))
    return signatures


def _alone(step: Step, *, in_a: bool) -> StepPair:
    return StepPair(
        a=step.seq if in_a else None,
        b=None if in_a else step.seq,
        kind=step.kind,
        title=step.title,
    )


def _pair(
    left: Step, right: Step, a: Exchange, b: Exchange, roles: tuple[IdRoles, IdRoles] | None
) -> StepPair:
    readers = (roles[0].read_bytes, roles[1].read_bytes) if roles else None
    request = _differing(differences, a.recorded.canonical, b.recorded.canonical, readers)
    answer: list[Change] = []
    metadata: list[Change] = []
    if left.kind == MODEL and roles:
        metadata += _id_changes(_answer_ids(a), _answer_ids(b))
    if left.kind == MODEL and left.conversation is not None and right.conversation is not None:
        _model_answers(left, right, answer, metadata)
    else:
        _other_answers(a, b, answer, metadata, readers)
    ids = _changes(("model-made ids", _ids(a), _ids(b)))
    (metadata if roles else answer).extend(ids)
    timing = _changes(
        ("duration", _ms(left.duration), _ms(right.duration)),
        ("first byte", _ms(_first_byte(a)), _ms(_first_byte(b))),
    )
    return StepPair(
        a=left.seq,
        b=right.seq,
        kind=left.kind,
        title=left.title,
        request=request,
        answer=tuple(answer),
        metadata=tuple(metadata),
        timing=timing,
    )


def _model_answers(left: Step, right: Step, answer: list[Change], metadata: list[Change]) -> None:
    assert left.conversation is not None and right.conversation is not None
    x, y = left.conversation.answer, right.conversation.answer
    if x is None or y is None:
        if (x is None) != (y is None):
            answer.append(Change("answer", _none_or("answer", x), _none_or("answer", y)))
        return
    answer += _changes(
        ("text", x.text, y.text),
        ("tool calls", _calls(x.tool_calls), _calls(y.tool_calls)),
        ("finish reason", x.finish_reason or "-", y.finish_reason or "-"),
        ("status", str(x.status), str(y.status)),
    )
    metadata += _changes(
        ("model asked", left.conversation.model or "-", right.conversation.model or "-"),
        ("model answered", x.model or "-", y.model or "-"),
        ("system_fingerprint", x.system_fingerprint or "-", y.system_fingerprint or "-"),
        ("usage", _usage(x.usage), _usage(y.usage)),
    )


def _id_changes(a: Minted, b: Minted) -> list[Change]:
    """The minted ids run B has in place of run A's: its answer's and each output item's."""
    theirs = dict(b)
    return [Change(where, x, theirs[where]) for where, x in a if theirs.get(where, x) != x]


def _ids(exchange: Exchange) -> str:
    return ", ".join(minted_ids(exchange)) or "-"


def _other_answers(
    a: Exchange,
    b: Exchange,
    answer: list[Change],
    metadata: list[Change],
    readers: _Readers | None,
) -> None:
    """A tool's (or any non-model step's) answers: status, outcome and body paths. A client
    that closed an answer early read it all the same: that outcome and ``complete`` differ
    in metadata only."""
    x, y = a.recorded.response, b.recorded.response
    answer += _changes(("status", str(x.status) if x else "-", str(y.status) if y else "-"))
    outcome = _changes(("outcome", a.recorded.outcome.value, b.recorded.outcome.value))
    read = {a.recorded.outcome, b.recorded.outcome} <= {Outcome.COMPLETE, Outcome.CLIENT_CLOSED}
    (metadata if read else answer).extend(outcome)
    old, new = response_body(a), response_body(b)
    if old is None or new is None:
        return
    answer += _differing(json_differences, old.data, new.data, readers)


def _differing(
    find: Callable[[bytes, bytes], list[Difference]],
    a_data: bytes,
    b_data: bytes,
    readers: _Readers | None,
) -> tuple[Change, ...]:
    """Where run B's bytes differ from run A's (``find`` takes B then A), model-made ids read
    by their role when ``readers`` are given.

    A path differs only when it differs both as stored and as read: the same bytes are the
    same whatever role an id plays in each run (an edited answer no longer mints the id that
    the later requests copied into the fork still echo), and ids that map one to one are the
    same step. Values are shown as stored, each id followed by its role in that run, so a
    changed id reads as two ids rather than a role against a raw id."""
    stored = find(b_data, a_data)
    if readers is None or not stored:
        return tuple(Change(d.path, d.recorded, d.live) for d in stored)
    by_path = {d.path: d for d in stored}
    capped = "…" in by_path  # past the cap, the stored paths are not all known
    read_a, read_b = readers
    changes: list[Change] = []
    for d in find(read_b(b_data), read_a(a_data)):
        was = by_path.get(d.path)
        if was is None and capped:
            changes.append(Change(d.path, d.recorded, d.live))
        elif was is not None:
            changes.append(
                Change(d.path, _roles(was.recorded, d.recorded), _roles(was.live, d.live))
            )
    return tuple(changes)


_ROLE = re.compile(r"⟨[^⟨⟩]*⟩")


def _roles(stored: str, read: str) -> str:
    """A value as stored, followed by the roles its ids were read as (``"call_9" ⟨call_ 1⟩``)."""
    known = set(_ROLE.findall(stored))
    roles = [role for role in dict.fromkeys(_ROLE.findall(read)) if role not in known]
    return " ".join([stored, *roles]) if roles else stored


def _changes(*triples: tuple[str, str, str]) -> tuple[Change, ...]:
    return tuple(Change(what, _short(x), _short(y)) for what, x, y in triples if x != y)


def _calls(calls: Sequence[Any]) -> str:
    return "; ".join(f"{call.name}({call.arguments})" for call in calls) or "-"


def _usage(usage: Any) -> str:
    return ", ".join(f"{name} {value}" for name, value in sorted(usage.items())) or "-"


def _none_or(what: str, value: object) -> str:
    return "-" if value is None else what


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _first_byte(exchange: Exchange) -> float | None:
    return exchange.recorded.response.first_byte_at if exchange.recorded.response else None


def _short(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
