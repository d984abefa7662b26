"""Drift: what a hit's stripped parts say about how the live request differs from the recording."""

import json
from typing import Any

from freezeframe.canonicalize import KeyConfig, RequestView, canonicalize, parse_rules
from freezeframe.canonicalize.drift import digests, drift_values, drifted

CHAT = "/v1/chat/completions"


def view(body: Any, path: str = CHAT, query: tuple[tuple[str, str], ...] = ()) -> RequestView:
    return RequestView(
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path=path,
        query=query,
        headers=(("content-type", "application/json"),),
        body=json.dumps(body).encode(),
        content_type="application/json",
    )


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], **extra}


def drift_between(
    live: RequestView, recorded: RequestView, config: KeyConfig | None = None
) -> tuple[str, ...]:
    config = config or KeyConfig()
    now, then = canonicalize(live, config), canonicalize(recorded, config)
    assert now.key == then.key, "drift is only asked of requests that hit"
    return drifted(now.stripped, digests(then.stripped))


def test_the_same_request_has_not_drifted() -> None:
    request = view(chat(user="alice", metadata={"team": "a"}))
    assert drift_between(request, request) == ()


def test_a_changed_end_user_is_drift_named_by_its_path() -> None:
    assert drift_between(view(chat(user="bob")), view(chat(user="alice"))) == ("body:$.user",)


def test_a_stripped_field_that_appears_or_goes_away_is_drift() -> None:
    with_metadata = view(chat(metadata={"team": "a"}, service_tier="flex"))
    assert drift_between(view(chat()), with_metadata) == ("body:$.metadata", "body:$.service_tier")
    assert drift_between(with_metadata, view(chat())) == ("body:$.metadata", "body:$.service_tier")


def test_ids_minted_for_every_call_are_never_drift() -> None:
    live = view(
        chat(request_id="r-2", idempotency_key="k-2", timestamp=2), query=(("trace_id", "t2"),)
    )
    recorded = view(
        chat(request_id="r-1", idempotency_key="k-1", timestamp=1), query=(("trace_id", "t1"),)
    )
    assert drift_between(live, recorded, KeyConfig(volatile_query=frozenset({"trace_id"}))) == ()


def test_mcp_ids_and_trace_meta_are_never_drift_but_its_other_parts_are() -> None:
    def call(id_: int, meta: dict[str, Any]) -> RequestView:
        message = {
            "jsonrpc": "2.0",
            "id": id_,
            "method": "tools/call",
            "params": {"name": "f", "_meta": meta},
        }
        return view(message, path="/mcp")

    assert drift_between(call(7, {"traceparent": "00-a-b-01"}), call(1, {"progressToken": 3})) == ()
    batch_live = view([{"jsonrpc": "2.0", "id": 9, "method": "ping"}], path="/mcp")
    batch_recorded = view([{"jsonrpc": "2.0", "id": 2, "method": "ping"}], path="/mcp")
    assert drift_between(batch_live, batch_recorded) == ()


def test_a_user_ignore_rule_reports_drift_but_a_substitution_does_not() -> None:
    rules = parse_rules(
        """
[[rule]]
path = "/v1/chat/completions"
ignore = ["$.tools"]
[[rule.substitute]]
path = "$.messages[*].content"
pattern = "\\\\d{4}-\\\\d{2}-\\\\d{2}"
replacement = "<date>"
"""
    )
    config = KeyConfig(rules=rules)

    def request(day: str, tools: list[str]) -> RequestView:
        return view(chat(messages=[{"role": "system", "content": f"Today is {day}."}], tools=tools))

    assert drift_between(request("2026-11-26", ["a"]), request("2026-11-25", ["a"]), config) == ()
    assert drift_between(request("2026-11-26", ["b"]), request("2026-11-26", ["a"]), config) == (
        "body:$.tools",
    )


def test_repeated_query_parameters_drift_when_any_one_changes() -> None:
    config = KeyConfig(volatile_query=frozenset({"tag"}))
    live = view(chat(), query=(("tag", "a"), ("tag", "c")))
    recorded = view(chat(), query=(("tag", "a"), ("tag", "b")))
    assert drift_between(live, recorded, config) == ("query:tag",)


def test_drift_values_name_what_the_recording_never_had() -> None:
    recorded = b'{"model": "m", "messages": []}'
    live = b'{"model": "m", "messages": [], "metadata": {"tenant": "acme-eu"}}'
    assert drift_values("body:$.metadata", live, recorded) == ("(absent)", '{"tenant":"acme-eu"}')
    assert drift_values("body:$.user", b'{"user": "u-2"}', b'{"user": "u-1"}') == (
        '"u-1"',
        '"u-2"',
    )
    assert drift_values("query:ts", b"{}", b"{}") is None
    assert drift_values("body:$.user", b"not json", b"{}") is None
