"""Key rules learned from the recordings: ``freezeframe rules suggest``.

A key is a guess about what is load-bearing. Recordings of the same call (one method, host,
port and path) whose canonical forms differ at only a few paths are evidence about those
paths: when the answers were the same, the path did not decide the answer; when every
value there is machine-made (a UUID, a timestamp, an epoch, a long hex or random token), it
is minted per call and a replay will never send the recorded one. Either way a rule that
leaves the path out of the key would let a replay hit. Each suggestion carries its evidence:
which exchanges, which path, which values.

Never suggested, whatever the evidence: the conversation itself (``messages``, ``input``,
``contents``, ``system``, ``instructions``, ``prompt``, ``tools``: the prompt is what a fix
changes, and leaving it out would hide exactly that), and the request line (method, host,
path). Headers are in a key only where a rule or profile put them, so they are left alone.

The same test runs on a miss (``from_miss``): when the nearest recording differs from the
request only at paths whose two values are both machine-made, the rule that would have made
it a hit is named in the miss's explanation.
"""

from __future__ import annotations

import glob
import itertools
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from freezeframe.canonicalize import DifferenceLike, KeyConfig, RuleSet, parse_rules
from freezeframe.canonicalize.diff import differences
from freezeframe.storage import Exchange, Miss, ReadStore, WriteStore
from freezeframe.whatif.rekey import RekeyReport, rekey

FEW_PATHS = 3
"""Two recordings of one call differing at more paths than this are two situations, not
evidence of a volatile field."""
PAIRS_SHOWN = 3
"""Pairs of exchanges given as evidence per suggestion (all are counted)."""
MAX_RECORDINGS = 200
"""Recordings of one call compared pairwise; past this, the first ones (pairs grow as n²)."""

CONVERSATION = re.compile(
    r"\$\.(messages|input|contents|system|system_instruction|systemInstruction|instructions|"
    r"prompt|tools|toolConfig|tool_choice)(?![A-Za-z0-9_])"
)
"""Body paths of the conversation itself, in every provider's spelling."""
_GENERATED = re.compile(
    r"""^"?(?:
        [0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}  # UUID
      | \d{4}-\d{2}-\d{2}[T\ ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?  # ISO time
      | 1\d{9}(?:\.\d+)?|1\d{12}                                                  # epoch s, ms
      | [0-9a-fA-F]{16,}                                                           # hex digest
      | (?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}           # random token
    )"?$""",
    re.VERBOSE,
)


def looks_generated(value: str) -> bool:
    """Whether a value, as a Difference shows it (compact JSON), is machine-made."""
    return bool(_GENERATED.match(value))


def proposable(path: str) -> bool:
    """Whether a rule may leave ``path`` (a Difference's) out of the key: a query parameter,
    a form field or a body path outside the conversation."""
    if path.startswith(("query.", "form.", "part.")):
        return True
    return path.startswith("$") and CONVERSATION.match(path) is None


@dataclass(frozen=True, slots=True)
class Pair:
    """Two recordings of one call that differ at the suggested path."""

    seqs: tuple[int, int]
    values: tuple[str, str]
    same_answer: bool


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A ``[[rule]]`` leaving one path out of one call's key, and why."""

    host: str
    path: str
    """The call's path (a glob matching it exactly)."""
    where: str
    """The part left out: a body path (``$.client_ts``), ``query.NAME`` or ``form.NAME``."""
    why: str
    """``same answer`` or ``generated values``."""
    pairs: int
    evidence: tuple[Pair, ...] = field(default=())

    @property
    def rule(self) -> dict[str, Any]:
        """The rule as the rules file holds it."""
        kind, _, name = self.where.partition(".")
        on = {"host": glob.escape(self.host), "path": glob.escape(self.path)}
        if kind == "query":
            return {**on, "ignore_query": [name]}
        if kind in ("form", "part"):
            return {**on, "ignore": [f"$.{name}"]}
        return {**on, "ignore": [self.where]}

    def toml(self) -> str:
        """The rule as a ``[[rule]]`` table to add to the rules file."""
        lines = ["[[rule]]"]
        for name, value in self.rule.items():
            lines.append(f"{name} = {_toml(value)}")
        return "\n".join(lines) + "\n"

    def inline(self) -> str:
        """The rule's keys on one line, for a message."""
        return ", ".join(f"{name} = {_toml(value)}" for name, value in self.rule.items())

    def line(self) -> str:
        shown = "; ".join(
            f"#{p.seqs[0]} {_cut(p.values[0])} vs #{p.seqs[1]} {_cut(p.values[1])}"
            for p in self.evidence
        )
        return (
            f"{self.host}{self.path} {self.where}: {self.why} in {self.pairs} pairs "
            f"of recordings ({shown})"
        )

    def document(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "path": self.path,
            "where": self.where,
            "why": self.why,
            "pairs": self.pairs,
            "rule": self.rule,
            "evidence": [
                {"exchanges": list(p.seqs), "values": list(p.values), "same_answer": p.same_answer}
                for p in self.evidence
            ],
        }


def suggest(exchanges: Sequence[Exchange]) -> list[Suggestion]:
    """The rules the recordings give evidence for, most evidence first."""
    calls: dict[tuple[str, str, int, str], list[Exchange]] = {}
    for exchange in exchanges:
        call = (
            exchange.recorded.method,
            exchange.recorded.host.lower(),
            exchange.recorded.port,
            _path(exchange.recorded.path),
        )
        calls.setdefault(call, []).append(exchange)
    found: dict[tuple[str, str, str], list[Pair]] = {}
    for (_, host, _, path), recorded in calls.items():
        for a, b in itertools.combinations(recorded[:MAX_RECORDINGS], 2):
            differing = differences(b.recorded.canonical, a.recorded.canonical)
            if not differing or len(differing) > FEW_PATHS:
                continue
            same = _same_answer(a, b)
            for difference in differing:
                if not proposable(difference.path):
                    continue
                generated = looks_generated(difference.live) and looks_generated(
                    difference.recorded
                )
                if same or generated:
                    pair = Pair((a.seq, b.seq), (difference.recorded, difference.live), same)
                    found.setdefault((host, path, difference.path), []).append(pair)
    result = [
        Suggestion(
            host,
            path,
            where,
            "same answer" if all(p.same_answer for p in pairs) else "generated values",
            len(pairs),
            tuple(pairs[:PAIRS_SHOWN]),
        )
        for (host, path, where), pairs in found.items()
    ]
    result.sort(key=lambda s: (-s.pairs, s.host, s.path, s.where))
    return result


def suggestions_of(store: ReadStore, cassette: str) -> list[Suggestion]:
    """``suggest`` over a cassette's recordings. Raises CassetteNotFound."""
    return suggest([store.exchange(cassette, s.seq) for s in store.exchanges(cassette)])


def from_miss(host: str, path: str, found: Iterable[DifferenceLike]) -> Suggestion | None:
    """The rule that would have made a miss a hit, when the nearest recording differs from
    the request only at proposable paths whose values are both machine-made; else None."""
    differing = [d for d in found if d.path != "…"]
    if not differing or len(differing) > FEW_PATHS:
        return None
    for d in differing:
        if not (proposable(d.path) and looks_generated(d.live) and looks_generated(d.recorded)):
            return None
    first = differing[0]
    pair = Pair((-1, -1), (first.recorded, first.live), False)
    return Suggestion(host.lower(), _path(path), first.path, "generated values", 1, (pair,))


def _path(path: str) -> str:
    return path.partition("?")[0]


def _same_answer(a: Exchange, b: Exchange) -> bool:
    """Whether two recordings were answered alike: the same status and body bytes."""
    if a.recorded.response is None or b.recorded.response is None:
        return False
    if a.recorded.response.status != b.recorded.response.status:
        return False
    if a.recorded.response.body_ref is not None or b.recorded.response.body_ref is not None:
        return a.recorded.response.body_ref == b.recorded.response.body_ref
    return a.recorded.response.body == b.recorded.response.body


def _cut(value: str) -> str:
    return value if len(value) <= 40 else value[:39] + "…"


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


@dataclass(frozen=True, slots=True)
class Preview:
    """What adding suggestions to the rules file would do to a cassette, worked out before
    anything changes: ``rekey``'s dry run under the new rules (recordings it would merge:
    its collisions) and the cassette's misses it would turn into hits."""

    text: str
    """The rules file as it would read."""
    added: str
    report: RekeyReport
    hits: tuple[Miss, ...]
    """Misses whose nearest recording differs only at paths the new rules leave out."""


def preview(
    store: WriteStore,
    cassette: str,
    chosen: Sequence[Suggestion],
    current: str,
    source: str,
    config_of: Callable[[RuleSet], KeyConfig],
) -> Preview:
    """The rules file ``current`` (read from ``source``) with ``chosen`` added, checked as
    the proxy would read it (RulesError naming the line), and what it would change."""
    added = "\n".join(s.toml() for s in chosen)
    text = current + ("" if not current or current.endswith("\n") else "\n")
    text += ("\n" if text else "") + added
    config = config_of(parse_rules(text, source))
    report = rekey(store, cassette, config, dry_run=True)
    left_out = {s.where for s in chosen}
    hits = tuple(
        miss
        for miss in store.misses(cassette)
        if miss.nearest
        and all(d.path in left_out for d in miss.nearest[0].differences if d.path != "…")
        and miss.nearest[0].differences
    )
    return Preview(text, added, report, hits)


def applied_document(path: Path, planned: Preview) -> dict[str, Any]:
    """``rules suggest --apply --json``'s ``applied``: the file written and what rekey would
    change under it."""
    return {
        "rules_file": str(path),
        "collisions": [asdict(c) for c in planned.report.collisions],
        "changed": len(planned.report.changed),
        "misses_turned_into_hits": [m.url for m in planned.hits],
    }


def suggestion_lines(
    cassette: str, found: Sequence[Suggestion], planned: Preview | None
) -> Iterator[str]:
    """What ``rules suggest`` prints: each suggestion and its rule, then what applying them
    would change."""
    if not found:
        yield f"{cassette}: no recordings give evidence for a rule"
    for one in found:
        yield one.line()
        yield textwrap.indent(one.toml(), "    ").removesuffix("\n")
    if planned is not None:
        yield (
            f"rekey would change {len(planned.report.changed)} keys of {cassette}: "
            f"{len(planned.report.collisions)} merged, "
            f"{len(planned.hits)} recorded misses turned into hits"
        )
        for group in planned.report.collisions:
            yield "  merged: " + ", ".join(f"#{seq}" for seq in group.seqs)
        for miss in planned.hits:
            yield f"  would hit: {miss.method} {miss.url}"


def write_rules(path: Path, planned: Preview) -> None:
    """Write the rules file as ``planned`` has it, making its directory if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(planned.text, encoding="utf-8")
