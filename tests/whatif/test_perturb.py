"""Perturbations as pure functions of the recorded bytes and the seed."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re

import pytest
from support.exchanges import changed, stored_exchange

from freezeframe.storage import Chunk, Exchange, Outcome
from freezeframe.whatif.perturb import Perturbed, Perturber, Request, SpecError, parse_spec

ORDERS = {"orders": [{"id": "a", "user": "u-1"}, {"id": "b", "user": "u-2"}, {"id": "c"}]}
TOOL = Request("tools.local", 443, "/orders")
MODEL = Request("api.openai.com", 443, "/v1/chat/completions")


def tool_answer(
    body: bytes = json.dumps(ORDERS).encode(), seq: int = 3, **changes: object
) -> Exchange:
    return stored_exchange(
        seq=seq,
        url="https://tools.local/orders",
        response_body=body,
        response_headers=(
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ),
        **changes,
    )


def once(
    spec: str, request: Request = TOOL, seed: int = 1, exchange: Exchange | None = None
) -> Perturbed | None:
    exchange = exchange or tool_answer()
    perturber = Perturber(parse_spec(spec), seed)
    return perturber.perturb(exchange, exchange.recorded.response, request)


def test_the_spec_reads_kind_argument_route_and_probability() -> None:
    [limit, drop] = parse_spec('429=2@api.openai.com/v1/*:0.3, json-drop=$["a,b"]@tools.local')
    assert (limit.kind, limit.argument, limit.probability) == ("429", "2", 0.3)
    assert (limit.route.host, limit.route.path) == ("api.openai.com", "/v1/*")
    assert (drop.kind, drop.argument, drop.probability) == ("json-drop", '$["a,b"]', 1.0)
    [port] = parse_spec("503@localhost:8443")
    assert (port.kind, port.argument, port.route.port) == ("5xx", "503", 8443)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("teapot", "unknown kind 'teapot'"),
        ("429:1.5", "the probability must be above 0 and at most 1"),
        ("json-drop", "json-drop needs a JSON path"),
        ("json-drop=items", "must start with '$'"),
        ("slow", "slow needs a factor"),
        ("cut=2", "cut takes a fraction"),
        ("reset=1", "reset takes no argument"),
        ("429@", "expected @HOST"),
    ],
)
def test_a_bad_item_is_named_with_what_is_wrong(spec: str, said: str) -> None:
    with pytest.raises(SpecError, match=re.escape(said)) as raised:
        parse_spec(spec)
    assert repr(spec) in str(raised.value)


def test_the_same_seed_perturbs_the_same_answers_and_another_seed_others() -> None:
    spec = parse_spec("429:0.5")
    answers = [tool_answer(seq=n) for n in range(40)]

    def rolls(seed: int) -> list[bool]:
        perturber = Perturber(spec, seed)
        return [perturber.perturb(a, a.recorded.response, TOOL) is not None for a in answers]

    assert rolls(7) == rolls(7)
    assert rolls(7) != rolls(8)
    assert 5 < sum(rolls(7)) < 35


def test_a_retry_of_a_failure_is_rolled_again() -> None:
    perturber = Perturber(parse_spec("reset:0.5"), 3)
    exchange = tool_answer()
    tries = [perturber.perturb(exchange, exchange.recorded.response, TOOL) for _ in range(30)]
    assert any(t is None for t in tries) and any(t is not None for t in tries)


def test_a_route_limits_a_perturbation_to_its_host_and_path() -> None:
    assert once("429@api.openai.com/v1/*") is None
    assert once("429@api.openai.com/v1/*", MODEL) is not None
    assert once("429@tools.local/other") is None


def test_a_rate_limit_is_in_the_providers_shape_and_leaves_the_recording_for_a_retry() -> None:
    done = once("429=7", MODEL)
    assert done is not None and done.failure
    assert (done.response.status, done.exchange.recorded.outcome) == (429, Outcome.COMPLETE)
    assert (b"retry-after", b"7") in done.response.headers
    assert json.loads(done.response.body)["error"]["code"] == "rate_limit_exceeded"
    claude = once("429", Request("api.anthropic.com", 443, "/v1/messages", anthropic=True))
    assert claude is not None
    assert json.loads(claude.response.body)["error"]["type"] == "rate_limit_error"


def test_a_server_error_is_the_status_given_or_one_the_seed_picks() -> None:
    assert once("502").response.status == 502  # type: ignore[union-attr]
    statuses = {once("5xx", seed=seed).response.status for seed in range(30)}  # type: ignore[union-attr]
    assert statuses == {500, 502, 503}


def test_a_reset_sends_the_head_then_resets_and_a_cut_closes_part_way() -> None:
    reset = once("reset")
    assert reset is not None and reset.failure and reset.played
    assert reset.response.body == b"" and reset.response.status == 200
    assert "reset" in (reset.exchange.recorded.error or "")
    cut = once("cut=0.5")
    assert cut is not None and cut.exchange.recorded.outcome is Outcome.TRUNCATED
    assert cut.response.body == json.dumps(ORDERS).encode()[: len(cut.response.body)]
    assert len(cut.response.body) == len(json.dumps(ORDERS)) // 2
    assert "reset" not in (cut.exchange.recorded.error or "")


def test_slow_stretches_the_recorded_delays_and_split_cuts_a_stream_elsewhere() -> None:
    slow = once("slow=20")
    assert slow is not None and slow.pace == 20 and slow.played and not slow.failure
    body = b"".join(b"data: %d\n\n" % n for n in range(10))
    stream = stored_exchange(
        seq=1,
        response_headers=((b"content-type", b"text/event-stream"),),
        response_body=body,
    )
    split = once("split", seed=5, exchange=stream)
    assert split is not None and split.response.body == body
    assert split.response.chunks != stream.recorded.response.chunks  # type: ignore[union-attr]
    assert split.response.chunks[0] == Chunk(0, 0.1)
    assert once("split") is None  # a JSON answer is not a stream


def test_json_mutations_change_a_tools_answer_and_say_where() -> None:
    dropped = once("json-drop=$.orders")
    assert dropped is not None and not dropped.failure
    assert len(json.loads(dropped.response.body)["orders"]) == 2
    assert (b"content-length", str(len(dropped.response.body)).encode()) in (
        dropped.response.headers
    )
    assert dropped.description.startswith("json-drop $.orders[")

    shuffled = json.loads(once("json-shuffle=$.orders").response.body)["orders"]  # type: ignore[union-attr]
    assert shuffled != ORDERS["orders"] and sorted(o["id"] for o in shuffled) == ["a", "b", "c"]

    swapped = once("json-swap=$.orders[*].id")
    assert swapped is not None and swapped.description.startswith("json-swap $.orders[")
    ids = [o["id"] for o in json.loads(swapped.response.body)["orders"]]
    assert sorted(ids) == ["a", "b", "c"] and ids != ["a", "b", "c"]

    removed = json.loads(once("json-remove=$.orders[*].user").response.body)  # type: ignore[union-attr]
    assert all("user" not in order for order in removed["orders"])

    numbers = tool_answer(b'{"total": 40, "ratio": 0.5, "ok": true}')
    changed = once("json-number=$.*", exchange=numbers)
    assert changed is not None
    document = json.loads(changed.response.body)
    assert document["total"] != 40 and document["ratio"] != 0.5 and document["ok"] is True


def test_a_json_mutation_keeps_the_answers_encoding_and_skips_what_is_not_json() -> None:
    zipped = gzip.compress(json.dumps(ORDERS).encode())
    plain = tool_answer(zipped)
    assert plain.recorded.response is not None
    headers = (*plain.recorded.response.headers, (b"content-encoding", b"gzip"))
    exchange = changed(
        plain, response=dataclasses.replace(plain.recorded.response, headers=headers)
    )
    dropped = once("json-drop=$.orders", exchange=exchange)
    assert dropped is not None
    assert len(json.loads(gzip.decompress(dropped.response.body))["orders"]) == 2
    assert once("json-drop=$.orders", exchange=tool_answer(b"not json")) is None
    assert once("json-drop=$.missing") is None
