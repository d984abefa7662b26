"""The pytest plugin, run the way a user runs it: real test files, a real proxy, real HTTPS.

Each test writes a test file with ``pytester``, runs pytest on it in a subprocess (where the
plugin is loaded from its ``pytest11`` entry point, as for any user), first recording against
a local HTTPS upstream, then replaying without it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trustme
from support.order_world import ModelServer, OrderService
from support.upstream import Upstream

from pytest_freezeframe import cassette_name

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

AGENT_TESTS = """
import os

import httpx
import pytest

URL = os.environ["UPSTREAM_URL"]


def ask(note, asked=os.environ.get("ASKED_FOR", "orders")):
    return httpx.post(URL + "/tool/counter", json={"q": asked, "user": note}, timeout=10)


def test_the_fixture_names_what_happened(freezeframe):
    assert ask("first").status_code == 200
    kind = "recorded" if freezeframe.mode == "record" else "hit"
    assert [(e.kind, e.method) for e in freezeframe.events] == [(kind, "POST")]
    [exchange] = freezeframe.exchanges
    assert exchange["request"]["url"] == URL + "/tool/counter"
    assert not any(e.method == "DELETE" for e in freezeframe.events)


@pytest.mark.freezeframe(cassette="drifting")
def test_a_marker_names_the_cassette():
    assert ask(os.environ.get("ASKED_AS", "first"), "orders").json()["count"] >= 1


@pytest.mark.freezeframe(cassette="ruled", rules="rules.toml")
def test_rules_leave_what_is_asked_out_of_the_key():
    assert ask("first").status_code == 200


def test_an_agent_that_swallows_errors(freezeframe):
    ask("first")
    if os.environ.get("FREEZEFRAME_PERTURB"):
        assert [e.perturbed for e in freezeframe.events] == ["503"]
"""


Run = Callable[..., pytest.RunResult]


@pytest.fixture
def run(
    pytester: pytest.Pytester, upstream: Upstream, upstream_ca_file: Path, tmp_path: Path
) -> Run:
    pytester.makepyfile(test_agent=AGENT_TESTS)
    (pytester.path / "rules.toml").write_text('[[rule]]\npath = "/tool/*"\nignore = ["$.q"]\n')
    data_dir = tmp_path / "ff"

    def run(*args: str, **env: str) -> pytest.RunResult:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("UPSTREAM_URL", upstream.base_url)
            patch.setenv("FREEZEFRAME_UPSTREAM_CA", str(upstream_ca_file))
            patch.setenv("FREEZEFRAME_REPLAY_PACE", "instant")
            for name, value in env.items():
                patch.setenv(name, value)
            return pytester.runpytest_subprocess(
                "-p", "no:cacheprovider", f"--freezeframe-data-dir={data_dir}", *args
            )

    return run


def test_record_then_replay_where_a_miss_fails_and_drift_is_summed_up(
    run: Run, upstream: Upstream
) -> None:
    recorded = run("--freezeframe-mode=record")
    recorded.assert_outcomes(passed=4)
    assert upstream.connections >= 1
    upstream.reset_counters()

    # Replay is the default; a token exported for another proxy does not lock the plugin out.
    replayed = run(FREEZEFRAME_ADMIN_TOKEN="exported-for-another-proxy-0123")
    replayed.assert_outcomes(passed=4)
    assert upstream.connections == 0

    workers = run("-n", "2")  # each xdist worker replays through a proxy of its own
    workers.assert_outcomes(passed=4)
    assert upstream.connections == 0

    missed = run(ASKED_FOR="refunds", ASKED_AS="second")
    missed.assert_outcomes(failed=2, passed=2)  # the marker's rules= keep one a hit
    missed.stdout.fnmatch_lines(
        [
            "*_ test_the_fixture_names_what_happened _*",
            "freezeframe: replay miss in cassette "
            "'test_agent::test_the_fixture_names_what_happened': no recording of POST "
            "https://*/tool/counter; nearest is #0 POST https://*/tool/counter, "
            'differing at $.q (recorded "orders", live "refunds")',
            "*- the test's own failure -*",
            "*assert 404 == 200*",
            "*_ test_an_agent_that_swallows_errors _*",
            "freezeframe: replay miss in cassette "
            "'test_agent::test_an_agent_that_swallows_errors'*",
            "*freezeframe: drift*",
            "test_agent.py::test_a_marker_names_the_cassette: POST https://*/tool/counter "
            'replayed drifting#0, drifted in body:$.user (recorded "first", live "second")',
            "test_agent.py::test_rules_leave_what_is_asked_out_of_the_key: POST https://*/tool/"
            'counter replayed ruled#0, drifted in body:$.q (recorded "orders", live "refunds")',
        ]
    )

    flaky = run(FREEZEFRAME_PERTURB="503@localhost/tool/*", FREEZEFRAME_SEED="1")
    flaky.assert_outcomes(failed=3, passed=1)  # a 503 is no miss: the swallowing agent passes
    assert upstream.connections == 0


IMPORT_TIME_AGENT = """
import os

import openai

# Built when the module is imported, as most agents build theirs: it reads HTTPS_PROXY and
# SSL_CERT_FILE now, before any fixture has run.
client = openai.OpenAI(
    base_url=os.environ["UPSTREAM_URL"] + "/v1", api_key="sk-test-import-time", max_retries=0
)


def ask():
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "where is my order?"}]
    )
    return answer.choices[0].message.content


def test_an_agent_built_at_import_time(freezeframe):
    assert ask()
    assert [e.kind for e in freezeframe.events] == [os.environ["EXPECTED_KIND"]]


def test_a_test_without_freezeframe_passes_through():
    assert ask()
"""


def test_a_client_built_at_import_time_goes_through_the_proxy(
    pytester: pytest.Pytester, upstream: Upstream, upstream_ca_file: Path, tmp_path: Path
) -> None:
    pytester.makepyfile(test_import_time=IMPORT_TIME_AGENT)
    data_dir = tmp_path / "ff"

    def run(*args: str, kind: str) -> pytest.RunResult:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("UPSTREAM_URL", upstream.base_url)
            patch.setenv("FREEZEFRAME_UPSTREAM_CA", str(upstream_ca_file))
            patch.setenv("FREEZEFRAME_REPLAY_PACE", "instant")
            patch.setenv("FREEZEFRAME_DATA_DIR", str(data_dir))
            patch.setenv("EXPECTED_KIND", kind)
            return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)

    # Without the project saying it uses freezeframe (a data dir in the environment says
    # nothing of this project), the client escapes: the test fails on the upstream's
    # certificate, and freezeframe says why instead of staying silent.
    escaped = run("-k", "built_at_import", kind="recorded")
    escaped.assert_outcomes(failed=1)
    escaped.stdout.fnmatch_lines(
        [
            "*nothing this test sent reached freezeframe's proxy: a client built when its "
            "module was imported*Set freezeframe_mode in the pytest configuration*",
            "*freezeframe: traffic that went around the proxy*",
            "*test_import_time.py::test_an_agent_built_at_import_time",
        ]
    )
    assert not [r for r in upstream.requests if r.target == "/v1/chat/completions"]

    recorded = run("--freezeframe-mode=record", kind="recorded")
    recorded.assert_outcomes(passed=2)
    asked = [r for r in upstream.requests if r.target == "/v1/chat/completions"]
    assert len(asked) == 2  # the plain test's call passed through the proxy, live
    upstream.reset_counters()

    # --freezeframe-data-dir on the command line says it as clearly as a mode (issue 32).
    given = run(f"--freezeframe-data-dir={data_dir}", "-k", "built_at_import", kind="hit")
    given.assert_outcomes(passed=1)
    assert upstream.connections == 0

    # The ini setting alone puts the environment in place; replay answers with no upstream.
    pytester.makeini("[pytest]\nfreezeframe_mode = replay\n")
    replayed = run("-k", "built_at_import", kind="hit")
    replayed.assert_outcomes(passed=1)
    assert upstream.connections == 0


def test_cassettes_are_named_after_their_test() -> None:
    assert cassette_name("tests/test_agent.py::test_refund[u-1]") == (
        "tests.test_agent::test_refund-u-1"
    )
    long = cassette_name("tests/" + "x" * 200 + ".py::test")
    assert len(long) <= 100 and long != cassette_name("tests/" + "x" * 199 + ".py::test")


def test_a_session_without_the_fixture_starts_no_proxy(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_plain=textwrap.dedent(
            """
            import os

            def test_plain():
                assert "HTTPS_PROXY" not in os.environ
            """
        )
    )
    # Nothing on the command line names freezeframe (--freezeframe-data-dir there arms the
    # plugin for import-time clients, issue 32): no proxy, and no data dir made.
    result = pytester.runpytest_subprocess()

    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".freezeframe").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_pytest_run_killed_outright_leaves_no_proxy_behind(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """SIGKILL skips pytest's unconfigure, where the plugin stops its proxy: the proxy must
    see its parent die and stop by itself, or every killed CI job leaves one running."""
    admin = tmp_path / "admin-url"
    pytester.makepyfile(
        test_killed=textwrap.dedent(
            f"""
            import os, pathlib, signal

            def test_killed_mid_run(freezeframe):
                pathlib.Path({str(admin)!r}).write_text(freezeframe.admin_url)
                os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    result = pytester.runpytest_subprocess(f"--freezeframe-data-dir={tmp_path / 'ff'}")
    assert result.ret == -signal.SIGKILL
    url = admin.read_text()
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/health", timeout=1.0)
        except httpx.TransportError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the proxy at {url} is still up {STOP_WAIT:.0f} s after pytest died")


STOP_WAIT = 20.0
"""Seconds the proxy may take to stop once its parent is gone (it drains its writer)."""


EXAMPLES = Path(__file__).parents[1] / "examples"
FILTER = 'orders = [o for o in found.json()["orders"] if o["user"] == user]'


def test_the_readme_example_locks_the_order_case(
    pytester: pytest.Pytester, upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path: Path
) -> None:
    for name in ("order_agent.py", "test_order_agent.py"):
        (pytester.path / name).write_text((EXAMPLES / name).read_text())
    model, orders = ModelServer(upstream_ca).start(), OrderService(upstream_ca).start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("ORDERS_MODEL_URL", model.base_url)
            patch.setenv("ORDERS_SERVICE_URL", orders.base_url)
            patch.setenv("FREEZEFRAME_UPSTREAM_CA", str(upstream_ca_file))
            patch.setenv("FREEZEFRAME_DATA_DIR", str(tmp_path / "ff"))
            pytester.runpytest_subprocess("--freezeframe-mode=record").assert_outcomes(passed=1)
            asked = len(model.requests), len(orders.requests)

            pytester.runpytest_subprocess().assert_outcomes(passed=1)
            assert (len(model.requests), len(orders.requests)) == asked

            agent = pytester.path / "order_agent.py"
            agent.write_text(agent.read_text().replace(FILTER, 'orders = found.json()["orders"]'))
            unfixed = pytester.runpytest_subprocess()
    finally:
        model.stop()
        orders.stop()

    unfixed.assert_outcomes(failed=1)
    unfixed.stdout.fnmatch_lines(
        ["freezeframe: replay miss in cassette 'orders-u-1': no recording of POST *differing at*"]
    )


def test_importing_the_plugin_imports_nothing_heavy() -> None:
    """pytest imports it in every session of an environment with freezeframe installed."""
    probe = (
        "import sys, pytest_freezeframe; "
        "print(sorted({'mitmproxy', 'sqlalchemy'} & set(sys.modules)))"
    )
    printed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert printed.stdout.strip() == "[]"


STRICT_TESTS = """
import os

import httpx
import pytest

URL = os.environ["UPSTREAM_URL"]


def agent():
    httpx.post(URL + "/tool/counter", json={"q": "lookup"}, timeout=10)
    if not os.environ.get("SKIP_DELETE"):  # the fix that silently skips a call
        httpx.post(URL + "/tool/counter", json={"q": "delete record"}, timeout=10)


@pytest.mark.freezeframe(cassette="strict-tape", strict=True)
def test_strict_marker():
    agent()


@pytest.mark.freezeframe(cassette="plain-tape")
def test_plain():
    agent()
"""


def test_strict_fails_a_test_that_left_a_recorded_call_unasked(
    pytester: pytest.Pytester, upstream: Upstream, upstream_ca_file: Path, tmp_path: Path
) -> None:
    pytester.makepyfile(test_tape=STRICT_TESTS)
    data_dir = tmp_path / "ff"

    def run(*args: str, **env: str) -> pytest.RunResult:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("UPSTREAM_URL", upstream.base_url)
            patch.setenv("FREEZEFRAME_UPSTREAM_CA", str(upstream_ca_file))
            patch.delenv("FREEZEFRAME_STRICT", raising=False)
            for name, value in env.items():
                patch.setenv(name, value)
            return pytester.runpytest_subprocess(
                "-p", "no:cacheprovider", f"--freezeframe-data-dir={data_dir}", *args
            )

    run("--freezeframe-mode=record").assert_outcomes(passed=2)
    run().assert_outcomes(passed=2)  # every recorded call asked for: strict passes too

    skipped = run(SKIP_DELETE="1")
    skipped.assert_outcomes(failed=1, passed=1)  # only the strict marker fails it
    skipped.stdout.fnmatch_lines(
        [
            "*_ test_strict_marker _*",
            "freezeframe strict: strict-tape: recorded but never asked for: "
            "#1 POST https://*/tool/counter",
        ]
    )
    # The ini setting makes every replayed test strict; the variable does the same.
    run("-o", "freezeframe_strict=true", SKIP_DELETE="1").assert_outcomes(failed=2)
    run(SKIP_DELETE="1", FREEZEFRAME_STRICT="1").assert_outcomes(failed=2)
