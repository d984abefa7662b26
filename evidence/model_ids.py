"""Ids a model API makes up afresh on every call, read by their role so two runs compare.

A faithful re-run of an agent differs from its recording in the ids the provider mints:
the answer's own (``chatcmpl-…``, ``resp_…``, ``msg_…``) and each tool call's
(``call_…``, ``toolu_…``, ``fc_…``), which the agent's next request echoes
(``tool_call_id``, ``tool_use_id``, ``call_id``, ``previous_response_id``). Such ids say
nothing about what was asked or answered; their *role* does: "the first tool call's id of
this run". So each run's minted ids are numbered in the order its answers first minted
them, and every occurrence of one, answer or later echo, is read as its role
(``⟨call_ 1⟩``). Two runs whose ids map one to one then read the same, while a request that
names an id the run never minted, or names another run's, still differs.

The ids are found under ``id`` and ``call_id`` members of the answers' JSON (a whole
answer, or each event of a stream), where the value starts with a minting prefix: the same
walk reads OpenAI Chat Completions and Responses and Anthropic Messages, whole or streamed.
Cohere's Chat v2 (``/v2/chat``) mints ids with no prefix, a UUID for the answer and
``<tool>_<random>`` for each tool call, so in its answers every ``id`` is read as minted: the
answer's (``⟨cohere-chat 1⟩``) and each tool call's, the object that holds a ``function``
(``⟨cohere-call 1⟩``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from freezeframe.canonicalize import sse_events
from freezeframe.providers.bodies import media_type, response_body
from freezeframe.storage import Exchange, boundedjson

__all__ = ["IdRoles", "minted_ids"]

PREFIXES = ("chatcmpl-", "resp_", "msg_", "call_", "toolu_", "srvtoolu_", "fc_", "rs_")
"""How the ids a model API mints begin (OpenAI chat, Responses and its items, Anthropic)."""
_MEMBERS = frozenset({"id", "call_id"})
_MINTED = re.compile(rf"^(?:{'|'.join(map(re.escape, PREFIXES))})[A-Za-z0-9_-]+$")
_UNPREFIXED = re.compile(r"^[A-Za-z0-9_-]{6,}$")
_COHERE_CHAT = "/v2/chat"
_MAX_EVENTS = 100_000


def minted_ids(exchange: Exchange) -> tuple[str, ...]:
    """The ids this exchange's answer minted, in the order they first appear."""
    return tuple(_minted(exchange))


def _minted(exchange: Exchange) -> dict[str, str]:
    """The ids this exchange's answer minted, each with its kind, in the order they first
    appear."""
    body = response_body(exchange)
    if body is None or exchange.recorded.response is None or not body.data:
        return {}
    if media_type(exchange.recorded.response.headers) == "text/event-stream":
        events = islice(sse_events(body.data), _MAX_EVENTS)
        values: Iterable[object] = (_parsed(data) for _, data in events)
    else:
        values = (_parsed(body.data),)
    walk = _walk_cohere if exchange.recorded.path.endswith(_COHERE_CHAT) else _walk
    found: dict[str, str] = {}
    for value in values:
        for minted, kind in walk(value):
            found.setdefault(minted, kind)
    return found


def _parsed(data: bytes | str) -> object:
    try:
        return boundedjson.loads(data)
    except ValueError:  # not JSON, or nested too deep to walk
        return None


def _walk(value: object) -> Iterator[tuple[str, str]]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for name, member in node.items():
                if name in _MEMBERS and isinstance(member, str) and _MINTED.match(member):
                    yield member, next(p for p in PREFIXES if member.startswith(p))
                elif isinstance(member, (dict, list)):
                    stack.append(member)
        elif isinstance(node, list):
            stack.extend(reversed(node))


def _walk_cohere(value: object) -> Iterator[tuple[str, str]]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            minted = node.get("id")
            if isinstance(minted, str) and _UNPREFIXED.match(minted):
                yield minted, "cohere-call" if "function" in node else "cohere-chat"
            stack.extend(m for m in reversed(node.values()) if isinstance(m, (dict, list)))
        elif isinstance(node, list):
            stack.extend(reversed(node))


class IdRoles:
    """One run's minted ids, each numbered by its role: its kind and its rank among the ids
    of that kind the run minted, in recorded order."""

    def __init__(self, exchanges: Sequence[Exchange]) -> None:
        self.roles: dict[str, str] = {}
        ranks: dict[str, int] = {}
        for exchange in exchanges:
            for minted, kind in _minted(exchange).items():
                if minted in self.roles:
                    continue
                ranks[kind] = ranks.get(kind, 0) + 1
                self.roles[minted] = f"⟨{kind} {ranks[kind]}⟩"
        names = sorted(self.roles, key=len, reverse=True)
        alternatives = "|".join(map(re.escape, names))
        self._pattern = (
            re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_-])") if names else None
        )

    def read(self, text: str) -> str:
        """``text`` with every id this run minted replaced by its role."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda found: self.roles[found.group(0)], text)

    def read_bytes(self, data: bytes) -> bytes:
        if self._pattern is None:
            return data
        try:
            return self.read(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return data
