"""The ids the OpenAI Responses API mints, and a live run's ids mapped onto a recording's.

A Responses run is chained by ids the server makes up: each answer has an ``id``
(``resp_…``) and each output item one of its own (``msg_…``, ``fc_…``, ``rs_…``), and the
agent's next request names them: ``previous_response_id``, the output items it sends back
as ``input`` (``id``, or an ``item_reference``), a function call's ``call_id``, or a path such as
``GET /v1/responses/{id}``. A recording holds the ids of the run that was recorded.

When a what-if sends a step upstream again (``--live``), the live answer comes back with
new ids, and every later request of the agent names those: the frozen rest of the run no
longer has the recorded requests' keys, though it asks the same thing. So a live answer to
a request the recording has is paired with the recorded answer, id for id (the response's
own, then each output item's ``id`` and ``call_id`` at its index, where both are of the same
kind), and a later
request is keyed as if it named the recorded ids (``IdMap.recorded_view``). ``diff``
pairs the ids of aligned model steps the same way and says which ids stand for which.

The Responses shapes: response.py (``id``, ``output[].id``) and the stream events of
response_stream_event.py (``response.created`` and ``response.completed`` carry the whole
Response, ``response.output_item.added`` an item at ``output_index``), openai 3.x.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from freezeframe.canonicalize import RequestView, sse_events
from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import (
    as_dict,
    as_list,
    as_str,
    media_type,
    parse_json,
    response_body,
)
from freezeframe.storage import Exchange

_ID = re.compile(r"^[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_-]{6,}$")
"""What a minted id looks like: a kind, an underscore, an opaque token (``resp_68af…``)."""
_RESPONSES_PATH = re.compile(r"/responses(/|$)")
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def is_responses_path(path: str) -> bool:
    """Whether a request path is one of the Responses API's (create, retrieve, cancel)."""
    return bool(_RESPONSES_PATH.search(path.split("?", 1)[0]))


type Minted = tuple[tuple[str, str], ...]
"""The ids an answer minted, each with where it stands (``response id``,
``output[0] call_id``), in order."""


def answer_ids(body: bytes, media: str) -> Minted:
    """The ids a Responses answer minted: the response's, then each output item's ``id``
    and ``call_id``. Reads a JSON Response or its event stream; () for anything else."""
    if media == "text/event-stream":
        return _stream_ids(body)
    value = as_dict(parse_json(body)) if body else {}
    return _response_ids(value)


def _response_ids(response: dict[str, JsonValue]) -> Minted:
    own = as_str(response.get("id"))
    if own is None or not _ID.match(own):
        return ()
    return (("response id", own), *_item_ids(as_list(response.get("output"))))


def _item_ids(items: Sequence[JsonValue]) -> Minted:
    found = []
    for at, item in enumerate(items):
        for name in ("id", "call_id"):
            value = as_str(as_dict(item).get(name))
            if value is not None and _ID.match(value):
                found.append((f"output[{at}] {name}", value))
    return tuple(found)


def _stream_ids(body: bytes) -> Minted:
    own: str | None = None
    items: dict[int, JsonValue] = {}
    for _, data in sse_events(body):
        event = as_dict(parse_json(data))
        kind = as_str(event.get("type")) or ""
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            whole = _response_ids(as_dict(event.get("response")))
            if len(whole) > 1:
                return whole
        if kind == "response.created":
            own = as_str(as_dict(event.get("response")).get("id"))
        elif kind == "response.output_item.added":
            at = event.get("output_index")
            items[at if isinstance(at, int) else len(items)] = event.get("item")
    if own is None or not _ID.match(own):
        return ()
    return (("response id", own), *_item_ids([items[at] for at in sorted(items)]))


def pair_ids(recorded: Minted, live: Minted) -> tuple[tuple[str, str], ...]:
    """(recorded id, live id) for each place both answers minted an id of the same kind,
    and they differ; an answer with more or fewer items pairs what the two have in common."""
    theirs = dict(live)
    pairs = []
    for where, old in recorded:
        new = theirs.get(where)
        if new and new != old and _kind(old) == _kind(new):
            pairs.append((old, new))
    return tuple(pairs)


def exchange_ids(exchange: Exchange) -> Minted:
    """The ids a recorded Responses answer minted; () for another API's or no answer."""
    if exchange.recorded.method != "POST" or not is_responses_path(exchange.recorded.path):
        return ()
    body = response_body(exchange)
    if body is None or exchange.recorded.response is None:
        return ()
    return answer_ids(body.data, media_type(exchange.recorded.response.headers))


def replaced_ids(source: Exchange, replaced: Exchange) -> tuple[tuple[str, str], ...]:
    """(recorded id, new id) for each id the answer of ``source`` minted that ``replaced``,
    the same request with another answer (a ``resend``, an ``edit``), mints anew: the
    requests recorded after ``source`` name the recorded ids, an agent given the new
    answer names the new ones."""
    return pair_ids(exchange_ids(source), exchange_ids(replaced))


def _kind(minted: str) -> str:
    return minted.split("_", 1)[0]


@dataclass(frozen=True, slots=True)
class Mapped:
    """A recorded id and the live id that stands for it in this run."""

    recorded: str
    live: str


class IdMap:
    """Live ids and the recorded ones they stand for, learned as live answers arrive.

    Held per cassette for a replay (``RuntimeState.response_ids``) and forgotten when
    replay starts from the top. Learned from and read by addons on the proxy's event loop;
    the lock keeps the table and its pattern in step for any other reader (``diff`` builds
    its own).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._to_recorded: dict[str, str] = {}
        self._live: Counter[str] = Counter()

    def next_live(self, key: str) -> int:
        """The occurrence of ``key`` this live request answers in the recording: the
        n-th live request with a key pairs with the n-th recording of it."""
        with self._lock:
            n = self._live[key]
            self._live[key] = n + 1
            return n

    def learn(self, pairs: Iterable[tuple[str, str]]) -> tuple[Mapped, ...]:
        """Add (recorded, live) pairs; returns those that were new."""
        added = []
        with self._lock:
            table = dict(self._to_recorded)
            for recorded, live in pairs:
                if table.get(live) != recorded:
                    table[live] = recorded
                    added.append(Mapped(recorded, live))
            self._to_recorded = table  # replaced whole: a reader never sees it half built
        return tuple(added)

    def mapped(self) -> tuple[Mapped, ...]:
        return tuple(Mapped(rec, live) for live, rec in self._to_recorded.items())

    def to_recorded(self, text: str) -> str:
        """``text`` with every live id replaced by the recorded one it stands for; only a
        whole id is replaced (``resp_abc`` is not, inside ``resp_abcdef``).

        Ids are found with ``str.find`` on their kinds (``resp_``, ``fc_``...), so a large
        body costs a scan in C, not a regular expression tried at every position."""
        table = self._to_recorded
        if not table:
            return text
        found: list[tuple[int, int, str]] = []
        for kind in {live[: live.index("_") + 1] for live in table}:
            at = text.find(kind)
            while at >= 0:
                end = at + len(kind)
                while end < len(text) and text[end] in _ID_CHARS:
                    end += 1
                recorded = table.get(text[at:end])
                if recorded is not None and (at == 0 or text[at - 1] not in _ID_CHARS):
                    found.append((at, end, recorded))
                at = text.find(kind, end)
        if not found:
            return text
        pieces, done = [], 0
        for at, end, recorded in sorted(found):
            pieces += [text[done:at], recorded]
            done = end
        return "".join(pieces) + text[done:]

    def recorded_view(self, view: RequestView) -> RequestView | None:
        """The request as the recorded run would have sent it: the live ids in its path,
        query and JSON body replaced by the recorded ones. None when it names none."""
        if not self._to_recorded:
            return None
        path = self.to_recorded(view.path)
        query = tuple((name, self.to_recorded(value)) for name, value in view.query)
        body = view.body
        if body and b"_" in body:
            try:
                body = self.to_recorded(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                body = view.body
        if (path, query, body) == (view.path, view.query, view.body):
            return None
        return replace(view, path=path, query=query, body=body)
