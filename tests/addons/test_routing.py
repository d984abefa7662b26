"""Which requests of a replay go upstream: --live, [[route]], --record-into, --after-miss."""

from __future__ import annotations

import pytest

from freezeframe.addons.routing import Decision, Routing
from freezeframe.addons.state import Mode
from freezeframe.canonicalize import parse_rules
from freezeframe.proxy.settings import build, parse_live

MODEL = parse_live("api.openai.com/v1/*")
ROUTES = parse_rules(
    '[[route]]\nhost = "*.internal"\npath = "/health"\nmode = "passthrough"\n'
    '[[route]]\nhost = "search.internal"\nmode = "auto"\n'
).routes


def test_outside_replay_routes_change_nothing() -> None:
    routing = Routing(live=(MODEL,), routes=ROUTES, record_into="new")
    for mode in (Mode.RECORD, Mode.AUTO, Mode.PASSTHROUGH):
        decided = routing.decide(mode, "api.openai.com", 443, "/v1/chat/completions", False)
        assert decided == Decision(mode, None)


def test_live_routes_go_upstream_and_are_recorded_only_into_the_new_run() -> None:
    kept = Routing(live=(MODEL,), record_into="new")
    assert kept.decide(Mode.REPLAY, "API.openai.com", 443, "/v1/chat/completions", False) == (
        Decision(Mode.RECORD, "new")
    )
    unkept = Routing(live=(MODEL,))
    assert unkept.decide(Mode.REPLAY, "api.openai.com", 443, "/v1/embeddings", False) == (
        Decision(Mode.PASSTHROUGH, None)
    )
    assert kept.decide(Mode.REPLAY, "api.openai.com", 443, "/health", False) == (
        Decision(Mode.REPLAY, "new")
    ), "a path the route does not name stays frozen"


def test_after_miss_live_replays_live_routes_until_the_run_has_missed() -> None:
    routing = Routing(live=(MODEL,), record_into="new", after_miss_live=True)
    before = routing.decide(Mode.REPLAY, "api.openai.com", 443, "/v1/chat/completions", False)
    assert before.mode is Mode.REPLAY and before.on_miss == Decision(Mode.RECORD, "new")
    after = routing.decide(Mode.REPLAY, "api.openai.com", 443, "/v1/chat/completions", True)
    assert after == Decision(Mode.RECORD, "new")


def test_rules_routes_give_their_mode_first_match_wins_and_a_port_is_matched() -> None:
    routing = Routing(live=(parse_live("localhost:8443"),), routes=ROUTES)
    assert routing.decide(Mode.REPLAY, "a.internal", 443, "/health", False).mode is Mode.PASSTHROUGH
    assert routing.decide(Mode.REPLAY, "search.internal", 443, "/q", False).mode is Mode.AUTO
    assert routing.decide(Mode.REPLAY, "localhost", 8443, "/v1/x", False).mode is Mode.PASSTHROUGH
    assert routing.decide(Mode.REPLAY, "localhost", 9443, "/v1/x", False).mode is Mode.REPLAY


@pytest.mark.parametrize(
    ("live", "after_miss", "error"),
    [
        (("https://api.openai.com",), "miss", "without a scheme"),
        (("host:port",), "miss", r"expected HOST\[:PORT\]"),
        ((), "live", "name them with --live"),
        (("api.openai.com",), "sometimes", "choose miss or live"),
    ],
)
def test_bad_live_settings_are_refused_in_one_line(
    live: tuple[str, ...], after_miss: str, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        build(
            mode="replay",
            cassette="c",
            data_dir="/tmp/unused",
            store=None,
            listen="127.0.0.1:0",
            admin="127.0.0.1:0",
            upstream_ca=None,
            live=live,
            after_miss=after_miss,
        )
