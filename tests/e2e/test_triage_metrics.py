"""``/metrics`` counts failures by kind, read from the signatures the proxy stored: one
label per kind, never the signature's text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families
from support.proxy import ProxyProcess
from support.triage_world import DayModel, DayTools, PlannedRun, order_agent

from freezeframe.evidence.signatures import KINDS

pytestmark = pytest.mark.e2e


def failures(proxy: ProxyProcess) -> tuple[dict[str, float], str]:
    text = proxy.admin("GET", "/metrics").text
    found = {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "freezeframe_failures"
        for sample in family.samples
    }
    return found, text


def test_a_scrape_counts_failures_by_kind_and_never_names_a_signature(
    start_proxy: Callable[..., ProxyProcess],
    client_env: Callable[[ProxyProcess], dict[str, str]],
    upstream_ca: trustme.CA,
) -> None:
    model, tools = DayModel(upstream_ca, 11).start(), DayTools(upstream_ca).start()
    try:
        proxy = start_proxy(mode="record", cassette="metrics-day")
        client_env(proxy)
        before, _ = failures(proxy)
        assert before == dict.fromkeys(KINDS, 0.0)
        for run in (
            PlannedRun("m-1", "rate_limit", 61_001),
            PlannedRun("m-2", "rate_limit", 61_002),
            PlannedRun("m-3", "loop", 61_002),
            PlannedRun("m-4", "healthy", 61_004),
        ):
            order_agent(model.base_url, tools.base_url, run)
        proxy.stored("metrics-day", 13)
        after, text = failures(proxy)
    finally:
        model.stop()
        tools.stop()
    assert after == dict.fromkeys(KINDS, 0.0) | {"provider_error": 2.0, "loop": 1.0}
    assert "Rate limit reached" not in text and "lookup_order" not in text
