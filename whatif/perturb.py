"""Recorded answers, perturbed: the "what if the provider had said 429 here" of fuzzing.

A fix tried against the one captured run has been tried against one world. Replay with
``--perturb SPEC`` serves the recording with some answers changed the way real services fail
or drift (a rate limit, a server error, a reset, a body cut short, a slow answer, a stream
split differently, a tool's JSON with an item dropped or two values swapped), each chosen by
a seeded roll, so a run that fails can be run again exactly from its seed.

A spec is a comma-separated list of ``KIND[=ARG][@HOST[:PORT][/PATH-GLOB]][:PROBABILITY]``
(probability 1 and every host when left out; a probability has a decimal point, ``:0.3``, so
that ``@localhost:8443`` is a port). For each answer, the first item whose route
matches and whose roll succeeds applies; an item that cannot apply to that answer (a JSON
mutation of an answer that is not JSON) leaves it to the next. The roll is made from the
seed, the recording served (cassette and seq) and how often it was asked for, so the same
seed perturbs the same answers whatever order concurrent requests arrive in, and whatever
in the request the key leaves out.

A failure (``429``, ``5xx``, ``reset``, ``cut``) is what the client got instead of the
recording, which it has not used up: a retry gets the recording, or (by a new roll) another
failure. A changed answer (``slow``, ``split``, ``json-*``) is the recording, served.

Everything here is a pure function of the recorded bytes and the roll: no mitmproxy, no
store; replay (``addons.replay``) applies the result.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from freezeframe.canonicalize import Route
from freezeframe.canonicalize.jsonpath import BadPath, JsonPath, Location, parse_path, render
from freezeframe.storage import Chunk, Exchange, Header, Outcome, RecordedResponse, boundedjson
from freezeframe.storage.encodings import content_codings, decode_body, encode

FAILURES = ("429", "5xx", "reset", "cut")
CHANGES = ("slow", "split", "json-drop", "json-shuffle", "json-number", "json-swap", "json-remove")
KINDS = (*FAILURES, *CHANGES)
SERVER_ERRORS = (500, 502, 503)
DEFAULT_RETRY_AFTER = 1
MARK = "freezeframe --perturb"
"""Said in every body freezeframe writes in a provider's name, so nobody mistakes it."""
_STATUS = re.compile(r"5\d\d")
_PROBABILITY = re.compile(r":(\d*\.\d*|1)$")
"""A trailing ``:0.3`` (a decimal point, or ``1``); ``:8443`` is the route's port."""


class SpecError(ValueError):
    """A spec that cannot be read; the message names the item and what is wrong."""


@dataclass(frozen=True, slots=True)
class Perturbation:
    """One item of a spec: what to do, to which answers, how often."""

    text: str
    """The item as written, which names it in tables and logs."""
    kind: str
    argument: str | None
    route: Route
    probability: float
    path: JsonPath | None = None
    """The JSON path of a ``json-*`` kind."""


@dataclass(frozen=True, slots=True)
class Request:
    """What a perturbation's route and the provider's error shape are matched against."""

    host: str
    port: int
    path: str
    anthropic: bool = False
    """The request came from an Anthropic client (``anthropic-version``): its error shape."""


@dataclass(frozen=True, slots=True)
class Perturbed:
    """An answer as perturbed: ``exchange`` says how the connection ends, ``response`` what
    is written; ``pace`` multiplies its recorded delays."""

    perturbation: Perturbation
    description: str
    """What was done, in a few words: ``429 retry-after 1``, ``json-drop $.orders[1]``."""
    exchange: Exchange
    response: RecordedResponse
    failure: bool
    """The client got this instead of the recording, which a retry may still get."""
    pace: float = 1.0
    played: bool = False
    """It must be played over a socket (its timing or its end is the point)."""


def parse_spec(text: str) -> tuple[Perturbation, ...]:
    """Read a spec; raise :class:`SpecError` naming the item that is wrong."""
    items = [item.strip() for item in _items(text)]
    if not any(items):
        raise SpecError(f"--perturb {text!r}: expected KIND[=ARG][@HOST[/PATH-GLOB]][:P], …")
    return tuple(_item(item) for item in items if item)


def _items(text: str) -> list[str]:
    """Commas separate items, except inside a JSON path's brackets or quotes."""
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def _item(text: str) -> Perturbation:
    rest, probability = text, 1.0
    if (found := _PROBABILITY.search(rest)) and found.group(1) != ".":
        probability = float(found.group(1))
        rest = rest[: found.start()]
        if not 0.0 < probability <= 1.0:
            raise SpecError(f"--perturb {text!r}: the probability must be above 0 and at most 1")
    where = "*"
    if "@" in rest:
        rest, _, where = rest.rpartition("@")
    kind, sep, argument = rest.partition("=")
    kind = kind.strip().lower()
    if _STATUS.fullmatch(kind):
        kind, argument, sep = "5xx", kind, "="
    if kind not in KINDS:
        raise SpecError(
            f"--perturb {text!r}: unknown kind {kind!r}; choose one of {', '.join(KINDS)}"
        )
    arg = argument.strip() if sep else None
    path = None
    if kind.startswith("json-"):
        if not arg:
            raise SpecError(f"--perturb {text!r}: {kind} needs a JSON path: {kind}=$.items")
        try:
            path = parse_path(arg)
        except BadPath as exc:
            raise SpecError(f"--perturb {text!r}: {exc}") from None
    else:
        _check_argument(text, kind, arg)
    return Perturbation(text, kind, arg, _route(text, where), probability, path)


def _check_argument(text: str, kind: str, arg: str | None) -> None:
    if kind in ("reset", "split") and arg is not None:
        raise SpecError(f"--perturb {text!r}: {kind} takes no argument")
    if arg is None:
        if kind == "slow":
            raise SpecError(f"--perturb {text!r}: slow needs a factor: slow=10")
        return
    try:
        number = float(arg)
    except ValueError:
        number = -1.0
    if kind == "5xx" and not _STATUS.fullmatch(arg):
        raise SpecError(f"--perturb {text!r}: a server error is 5xx or a status such as 503")
    if kind == "cut" and not 0.0 <= number < 1.0:
        raise SpecError(f"--perturb {text!r}: cut takes a fraction of the body: cut=0.5")
    if kind in ("429", "slow") and number <= 0:
        what = "seconds of retry-after" if kind == "429" else "a factor"
        raise SpecError(f"--perturb {text!r}: {kind} takes {what} above 0")


def _route(text: str, where: str) -> Route:
    """``HOST[:PORT][/PATH-GLOB]``, the shape of ``--live``."""
    place, slash, path = where.strip().partition("/")
    host, colon, port = place.rpartition(":") if ":" in place else (place, "", "")
    if not host or (colon and not port.isdigit()):
        raise SpecError(f"--perturb {text!r}: expected @HOST[:PORT][/PATH-GLOB] after @")
    return Route(
        number=0,
        host=host.lower(),
        path=f"/{path}" if slash else "*",
        port=int(port) if colon else None,
    )


class Perturber:
    """The perturbations of one run, and how often each answer was asked for."""

    def __init__(self, perturbations: Sequence[Perturbation], seed: int) -> None:
        self.perturbations = tuple(perturbations)
        self.seed = seed
        self._lock = threading.Lock()
        self._asked: Counter[tuple[str, int]] = Counter()

    def perturb(
        self, exchange: Exchange, response: RecordedResponse, request: Request
    ) -> Perturbed | None:
        """The perturbed answer for this request, or None: serve the recording."""
        slot = (exchange.recorded.cassette, exchange.seq)
        with self._lock:
            attempt = self._asked[slot]
            self._asked[slot] = attempt + 1
        rng = random.Random(f"{self.seed}/{exchange.recorded.cassette}/{exchange.seq}/{attempt}")
        for perturbation in self.perturbations:
            if not perturbation.route.applies_to(request.host.lower(), request.path, request.port):
                continue
            if rng.random() >= perturbation.probability:
                continue
            done = apply(perturbation, exchange, response, request, rng)
            if done is not None:
                return done
        return None


def apply(
    perturbation: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed | None:
    """``perturbation`` applied to the recorded answer; None where it cannot apply."""
    return _APPLY[perturbation.kind](perturbation, exchange, response, request, rng)


def _rate_limited(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed:
    seconds = p.argument or str(DEFAULT_RETRY_AFTER)
    message = f"Rate limit reached; retry after {seconds} s ({MARK} {p.text})"
    if request.anthropic:
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": message},
        }
    else:
        body = {
            "error": {
                "message": message,
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    answer = _error_answer(
        response, 429, "Too Many Requests", body, ((b"retry-after", seconds.encode()),)
    )
    return _failed(p, f"429 retry-after {seconds}", exchange, answer)


def _server_error(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed:
    status = int(p.argument) if p.argument else rng.choice(SERVER_ERRORS)
    message = f"The server had an error while processing your request ({MARK} {p.text})"
    if request.anthropic:
        kind = "overloaded_error" if status == 529 else "api_error"
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    answer = _error_answer(response, status, "", body, ())
    return _failed(p, str(status), exchange, answer)


def _reset(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed | None:
    return _cut_at(p, exchange, response, 0, f"connection reset by peer ({MARK} reset)", "reset")


def _cut(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed | None:
    if response.body_ref is not None or len(response.body) < 2:
        return None
    fraction = float(p.argument) if p.argument is not None else rng.uniform(0.1, 0.9)
    at = min(int(len(response.body) * fraction), len(response.body) - 1)
    error = f"connection closed before the body ended ({MARK} {p.text})"
    return _cut_at(p, exchange, response, at, error, f"cut at {at} of {len(response.body)} bytes")


def _cut_at(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    at: int,
    error: str,
    description: str,
) -> Perturbed | None:
    if response.body_ref is not None:
        return None
    chunks = tuple(chunk for chunk in response.chunks if chunk.offset < at) if at else ()
    answer = dataclasses.replace(response, body=response.body[:at], chunks=chunks, trailers=())
    cut = dataclasses.replace(
        exchange.recorded,
        outcome=Outcome.TRUNCATED,
        error=error,
        duration=chunks[-1].at if chunks else response.first_byte_at,
        response=answer,
    )
    ended = dataclasses.replace(exchange, recorded=cut)
    return Perturbed(p, description, ended, answer, failure=True, played=True)


def _slow(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed:
    factor = float(p.argument or 1)
    return Perturbed(
        p, f"slow x{factor:g}", exchange, response, failure=False, pace=factor, played=True
    )


def _split(
    p: Perturbation,
    exchange: Exchange,
    response: RecordedResponse,
    request: Request,
    rng: random.Random,
) -> Perturbed | None:
    """The same bytes in other pieces: cut at random offsets, each piece at the time the
    recording's byte at its start arrived."""
    size = len(response.body)
    if response.body_ref is not None or size < 2 or not _streamed(response.headers):
        return None
    pieces = max(2, len(response.chunks))
    offsets = sorted(rng.sample(range(1, size), min(pieces - 1, size - 1)))
    chunks = tuple(Chunk(offset, _arrival(response, offset)) for offset in (0, *offsets))
    if chunks == response.chunks:
        chunks = (*chunks[:-1], Chunk(chunks[-1].offset - 1 or 1, chunks[-1].at))
    answer = dataclasses.replace(response, chunks=chunks)
    served = dataclasses.replace(
        exchange, recorded=dataclasses.replace(exchange.recorded, response=answer)
    )
    return Perturbed(
        p, f"split in {len(chunks)} pieces", served, answer, failure=False, played=True
    )


def _streamed(headers: Sequence[Header]) -> bool:
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return True
        if lowered == b"content-type" and value.lower().startswith(b"text/event-stream"):
            return True
    return False


def _arrival(response: RecordedResponse, offset: int) -> float:
    at = response.first_byte_at or 0.0
    for chunk in response.chunks:
        if chunk.offset > offset:
            break
        at = chunk.at
    return at


Mutation = Callable[[Any, Location, Any, random.Random], str | None]
"""A change at one place of a document; what it did, or None where it could not."""
DocumentMutation = Callable[[Any, JsonPath, random.Random], list[str]]
"""A change to a document at the places a path selects; what it did, place by place."""


def _each(mutate: Mutation) -> DocumentMutation:
    """``mutate`` at every place the path selects, last first, so that removing one place
    leaves the others where they were."""

    def mutated(document: Any, path: JsonPath, rng: random.Random) -> list[str]:
        done = []
        for location, value in reversed(path.find(document)):
            if (said := mutate(document, location, value, rng)) is not None:
                done.append(said)
        return done[::-1]

    return mutated


def _json(mutate: DocumentMutation) -> Callable[..., Perturbed | None]:
    """A JSON answer changed by ``mutate``; None when it is not JSON or nothing changed."""

    def perturb(
        p: Perturbation,
        exchange: Exchange,
        response: RecordedResponse,
        request: Request,
        rng: random.Random,
    ) -> Perturbed | None:
        if response.body_ref is not None or p.path is None:
            return None
        found = decode_body(response.body, response.headers)
        try:
            document = boundedjson.loads(found.data) if found.whole else None
        except ValueError:
            return None
        if document is None:
            return None
        done = mutate(document, p.path, rng)
        if not done:
            return None
        body = encode(
            json.dumps(document, ensure_ascii=False).encode(), content_codings(response.headers)
        )
        first = response.chunks[0].at if response.chunks else (response.first_byte_at or 0.0)
        answer = dataclasses.replace(
            response,
            headers=_with_length(response.headers, len(body)),
            body=body,
            chunks=(Chunk(0, first),),
            trailers=(),
        )
        served = dataclasses.replace(
            exchange, recorded=dataclasses.replace(exchange.recorded, response=answer)
        )
        description = f"{p.kind} {'; '.join(done)}"
        return Perturbed(p, description, served, answer, failure=False)

    return perturb


def _parent(document: Any, location: Location) -> Any:
    target = document
    for key in location[:-1]:
        target = target[key]
    return target


def _drop(document: Any, location: Location, value: Any, rng: random.Random) -> str | None:
    if not isinstance(value, list) or not value:
        return None
    index = rng.randrange(len(value))
    del value[index]
    return render((*location, index))


def _shuffle(document: Any, location: Location, value: Any, rng: random.Random) -> str | None:
    if not isinstance(value, list) or len(value) < 2:
        return None
    before = list(value)
    rng.shuffle(value)
    if value == before:
        value.append(value.pop(0))
    return render(location)


def _number(document: Any, location: Location, value: Any, rng: random.Random) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not location:
        return None
    if isinstance(value, int):
        changed: int | float = value + rng.choice((-1, 1)) * rng.randint(1, max(1, abs(value)))
    else:
        changed = round(value * rng.uniform(0.5, 1.5), 6) or 1.0
    _parent(document, location)[location[-1]] = changed
    return f"{render(location)} {value} -> {changed}"


def _remove(document: Any, location: Location, value: Any, rng: random.Random) -> str | None:
    if not location:
        return None
    parent = _parent(document, location)
    if isinstance(parent, list):
        parent.pop(location[-1])  # type: ignore[arg-type]
    else:
        del parent[location[-1]]
    return render(location)


def _swap(document: Any, path: JsonPath, rng: random.Random) -> list[str]:
    """Two different string values among those the path selects change places."""
    places = [(loc, v) for loc, v in path.find(document) if isinstance(v, str) and loc]
    pairs = [(a, b) for i, a in enumerate(places) for b in places[i + 1 :] if a[1] != b[1]]
    if not pairs:
        return []
    (first, one), (second, other) = rng.choice(pairs)
    _parent(document, first)[first[-1]] = other
    _parent(document, second)[second[-1]] = one
    return [f"{render(first)} <-> {render(second)}"]


def _error_answer(
    recorded: RecordedResponse,
    status: int,
    reason: str,
    document: dict[str, Any],
    extra: tuple[Header, ...],
) -> RecordedResponse:
    """freezeframe's answer in a provider's error shape, at the recording's first byte."""
    body = json.dumps(document).encode()
    headers: tuple[Header, ...] = (
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    )
    at = recorded.first_byte_at or 0.0
    return RecordedResponse(
        status=status,
        reason=reason,
        http_version=recorded.http_version,
        headers=headers,
        body=body,
        chunks=(Chunk(0, at),),
        first_byte_at=at,
    )


def _failed(
    p: Perturbation, description: str, exchange: Exchange, answer: RecordedResponse
) -> Perturbed:
    answered = dataclasses.replace(
        exchange.recorded,
        response=answer,
        outcome=Outcome.COMPLETE,
        error=None,
        duration=answer.first_byte_at,
    )
    served = dataclasses.replace(exchange, recorded=answered)
    return Perturbed(p, description, served, answer, failure=True)


def _with_length(headers: Sequence[Header], size: int) -> tuple[Header, ...]:
    return tuple(
        (name, str(size).encode()) if name.lower() == b"content-length" else (name, value)
        for name, value in headers
    )


_APPLY: dict[str, Callable[..., Perturbed | None]] = {
    "429": _rate_limited,
    "5xx": _server_error,
    "reset": _reset,
    "cut": _cut,
    "slow": _slow,
    "split": _split,
    "json-drop": _json(_each(_drop)),
    "json-shuffle": _json(_each(_shuffle)),
    "json-number": _json(_each(_number)),
    "json-swap": _json(_swap),
    "json-remove": _json(_each(_remove)),
}
