"""Every reader over traffic as real agents send it (issue 22).

One proxy records the corpus of tests/support/corpus.py (openai, anthropic, the MCP SDK, the
OpenAI Agents SDK, pydantic-ai, LangChain with LangSmith tracing, LiteLLM, smolagents, boto3's
Bedrock Converse, the cohere SDK's Chat v2, the openai npm package and the MCP TypeScript SDK
on Node, requests and httpx, against local servers) twice, into ``corpus`` and ``rerun``; the second
time the upstream mints other ids, as a live model does. Then the case file is crawled from
``/`` (every link, HTML and ``.json`` twin) and ``show``, ``diff``, ``search`` and every
export format read all of it. Then the proxy replays ``corpus``, where an agent asks something
new (a miss), and ``corpus`` is forked: the pages a person reads are checked in chromium.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import openai
import pytest
import trustme
from botocore.exceptions import ClientError
from click.testing import CliRunner
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import ARTIFACTS, artifact_path, chromium_or_skip, failed
from support.cloud_upstream import CloudUpstream
from support.corpus import (
    BEDROCK_MODEL,
    BEDROCK_WEATHER,
    COHERE_MODEL,
    WEATHER,
    bedrock_client,
    send_corpus,
)
from support.mcp_server import McpServer
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe import cli
from freezeframe.proxy.trust import client_bundle

pytestmark = pytest.mark.e2e

CASSETTES = ("corpus", "rerun")
MAX_PAGES = 3000
"""The crawl's bound: the corpus's pages number a few hundred."""


@dataclass
class Recorded:
    proxy: ProxyProcess
    data_dir: Path
    upstream: Upstream
    mcp: McpServer


def _record(proxy: ProxyProcess, upstream: Upstream, mcp_url: str, cassette: str) -> None:
    proxy.admin("PUT", "/api/mode", json={"mode": "record", "cassette": cassette})
    send_corpus(upstream, mcp_url)


@pytest.fixture(scope="module")
def recorded(
    upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recorded]:
    data_dir = tmp_path_factory.mktemp("corpus") / "data"
    proxy = ProxyProcess(data_dir, cassette=CASSETTES[0], upstream_ca=upstream_ca_file)
    with (
        CloudUpstream(upstream_ca) as upstream,
        McpServer() as mcp,
        pytest.MonkeyPatch.context() as env,
    ):
        proxy.start()
        try:
            for name in list(os.environ):
                if name.lower() in ("all_proxy", "ssl_cert_dir"):
                    env.delenv(name)
            for name, value in proxy.client_env(client_bundle(data_dir)).items():
                env.setenv(name, value)
            for cassette in CASSETTES:
                upstream.id_salt = "" if cassette == "corpus" else "x9"
                upstream.reset_counters(endpoints=True)
                _record(proxy, upstream, mcp.url, cassette)
            counted = len(proxy.admin("GET", "/api/cassettes/rerun").json())
            proxy.stored("rerun", counted)
            proxy.admin("PUT", "/api/mode", json={"mode": "replay", "cassette": "corpus"})
            with pytest.raises(openai.NotFoundError):
                ask_something_new(upstream)
            env.undo()
            code, out = _cli(data_dir, "fork", "corpus", "corpus-fork", "--upto", "0")
            assert code == 0, out
            yield Recorded(proxy, data_dir, upstream, mcp)
        finally:
            proxy.kill()


NEW_QUESTION = "What is the weather in Lyon?"


def ask_something_new(upstream: Upstream) -> None:
    """The corpus's first chat with one word changed: a miss in replay."""
    client = openai.OpenAI(base_url=upstream.url("/v1"), api_key="sk-corpus", max_retries=0)
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": NEW_QUESTION}],
        tools=[WEATHER],  # type: ignore[list-item]
        user="user-1234",
    )


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and name in ("href", "src"):
                self.links.append(value)


def crawl(proxy: ProxyProcess, start: str = "/") -> dict[str, int]:
    """Every page reachable from ``start`` on the admin port, and each one's ``.json`` twin,
    with the status each answered (0: the connection broke instead)."""
    seen: dict[str, int] = {}
    queue = [start]
    browser = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with httpx.Client(
        base_url=proxy.admin_url, trust_env=False, timeout=20, headers=browser
    ) as client:
        while queue and len(seen) < MAX_PAGES:
            path = queue.pop()
            if path in seen:
                continue
            try:
                response = client.get(path)
            except httpx.TransportError:
                seen[path] = 0
                continue
            seen[path] = response.status_code
            if response.is_redirect:
                queue.append(response.headers["location"])
            if "text/html" not in response.headers.get("content-type", ""):
                continue
            bare = urlsplit(path)
            if not bare.path.endswith(".json") and bare.path not in ("/", "/login"):
                twin = bare._replace(path=bare.path + ".json").geturl()
                queue.append(twin)
            parser = _Links()
            parser.feed(response.text)
            for link in parser.links:
                target = urlsplit(urljoin(path, link))
                if target.scheme or target.netloc or not target.path.startswith("/"):
                    continue
                queue.append(target._replace(fragment="").geturl())
    return seen


def test_every_page_of_the_case_file_answers_without_a_server_error(recorded: Recorded) -> None:
    seen = crawl(recorded.proxy)
    broken = {path: status for path, status in seen.items() if status >= 500 or status == 0}
    assert broken == {}
    exchanges = [p for p in seen if p.startswith("/cassettes/corpus/") and p[18:].isdigit()]
    assert len(exchanges) == len(recorded.proxy.admin("GET", "/api/cassettes/corpus").json())
    assert len(seen) < MAX_PAGES


def test_the_steps_and_exchange_pages_count_in_words_a_person_reads(recorded: Recorded) -> None:
    """ "1 messages" and "1 tools offered" read as a typo where a person looks first."""
    rows = recorded.proxy.admin("GET", "/api/cassettes/corpus").json()
    paths = ["/cassettes/corpus/steps", *(f"/cassettes/corpus/{r['seq']}" for r in rows)]
    for path in paths:
        text = recorded.proxy.admin("GET", path).text
        assert not re.search(r"\b1 (messages|tools|exchanges|chunks|misses)\b", text), path
    steps = recorded.proxy.admin("GET", "/cassettes/corpus/steps").text
    assert re.search(r"\b1 message\b", steps)  # the corpus has a one-message call


def test_smolagents_results_sent_back_as_text_are_linked_to_their_calls(
    recorded: Recorded,
) -> None:
    """smolagents sends the model's call back as the assistant's text ("Calling tools:
    [...]") and its result as the user's ("Observation: ..."); its steps said "result
    carried in not found" (issue 32). Only ``final_answer``, which ends the run, has none."""
    document = recorded.proxy.admin("GET", "/cassettes/corpus/steps.json").json()
    calls = [
        (step["seq"], call)
        for step in document["steps"]
        for call in step["calls"]
        if "Bern" in call["call"]["arguments"]
    ]
    assert [call["call"]["name"] for _, call in calls] == ["get_weather", "final_answer"]
    (asked, weather), (answered, final) = calls
    assert weather["result_in"] == {
        "seq": answered,
        "match": "exact",
        "why": f"Calling tools: {weather['call']['id']}, then Observation:",
    }
    assert final["result_in"] is None and answered > asked


def test_a_langsmith_trace_upload_never_runs_a_tool(recorded: Recorded) -> None:
    """LangChain with LangSmith tracing on uploads its run trees, the tool's arguments and
    result among them, to ``/runs/multipart``; the steps said the upload ran the tool the
    model asked for (issue 32). Telemetry runs nothing: the call was run locally."""
    rows = recorded.proxy.admin("GET", "/api/cassettes/corpus").json()
    uploads = [r["seq"] for r in rows if urlsplit(r["url"]).path == "/runs/multipart"]
    assert len(uploads) == 2  # the call and the tool's run, then the answer's
    document = recorded.proxy.admin("GET", "/cassettes/corpus/steps.json").json()
    steps = {step["seq"]: step for step in document["steps"]}
    assert [steps[seq]["executes"] for seq in uploads] == [None, None]
    (vienna,) = [
        call
        for step in document["steps"]
        for call in step["calls"]
        if "Vienna" in call["call"]["arguments"]
    ]
    assert vienna["call"]["name"] == "get_weather"
    assert vienna["executed_by"] is None
    assert vienna["result_in"]["seq"] > uploads[0]  # uploaded before the result went back


def _cli(data_dir: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.main, [*args, "--data-dir", str(data_dir)])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def test_show_reads_every_exchange_of_the_corpus(recorded: Recorded) -> None:
    rows = recorded.proxy.admin("GET", "/api/cassettes/corpus").json()
    code, listing = _cli(recorded.data_dir, "show", "corpus")
    assert code == 0, listing
    for row in rows:
        for json_flag in ((), ("--json",)):
            code, out = _cli(recorded.data_dir, "show", "corpus", str(row["seq"]), *json_flag)
            assert code == 0, out
    code, out = _cli(recorded.data_dir, "show", "corpus", "--misses")
    assert code == 0, out


def test_search_finds_what_each_client_sent(recorded: Recorded) -> None:
    asked = (
        "Paris",
        "Oslo",
        "Rome",
        "Madrid",
        "Vienna",
        "Lisbon",
        "Berlin",
        "Bern",
        "Zurich",
        "Hamburg",
    )  # a client each
    for word in (*asked, "lookup", "trace.span", "Forecaster"):
        code, out = _cli(recorded.data_dir, "search", word, "--json")
        assert code == 0, out
        assert json.loads(out), word


def test_the_cohere_sdks_chats_are_cohere_s_with_model_finish_and_usage(
    recorded: Recorded,
) -> None:
    """The ``cohere`` SDK's ``POST /v2/chat``, whole and streamed, was ``generic.json`` with no
    model or tokens read (issue 32)."""
    code, out = _cli(recorded.data_dir, "show", "corpus", "--json")
    assert code == 0, out
    facts = [r["facts"] for r in json.loads(out) if urlsplit(r["url"]).path == "/v2/chat"]
    assert [(f.get("provider"), f.get("api"), f.get("model")) for f in facts] == [
        ("cohere", "cohere.chat", COHERE_MODEL)
    ] * 3
    assert [(f["stream"], f["finish_reason"]) for f in facts] == [
        (False, "TOOL_CALL"),
        (True, "COMPLETE"),
        (True, "TOOL_CALL"),
    ]
    assert [f["usage"] for f in facts] == [
        {
            "input_tokens": 710 + n,
            "output_tokens": 3 + n,
            "billed_units.input_tokens": 9,
            "billed_units.output_tokens": 3 + n,
            "cached_tokens": 0,
        }
        for n in (1, 2, 3)
    ]


@pytest.mark.parametrize("form", ["jsonl", "bundle", "har", "otel", "dataset"])
def test_every_export_format_takes_the_whole_corpus(
    recorded: Recorded, form: str, tmp_path: Path
) -> None:
    target = tmp_path / f"corpus.{form}"
    code, out = _cli(recorded.data_dir, "export", "corpus", "-o", str(target), "--format", form)
    assert code == 0, out
    assert target.stat().st_size > 0


def test_no_exchange_of_the_corpus_is_called_cut_off(recorded: Recorded) -> None:
    """Every upstream answered whole; the clients that stopped reading early closed it."""
    for cassette in CASSETTES:
        rows = recorded.proxy.admin("GET", f"/api/cassettes/{cassette}").json()
        outcomes = {row["outcome"] for row in rows}
        assert outcomes <= {"complete", "client_closed"}, cassette
        assert "client_closed" in outcomes


def test_the_mcp_typescript_sdks_listening_stream_closed_by_its_client_is_no_failure(
    recorded: Recorded,
) -> None:
    """The MCP TypeScript SDK opens a standalone GET stream after its handshake and
    ``client.close()`` closes it after its headers: it was recorded ``truncated`` and triaged
    as ``upstream_failure`` ("Client disconnected."), issue 32."""
    for cassette in CASSETTES:
        rows = recorded.proxy.admin("GET", f"/api/cassettes/{cassette}").json()
        listening = [r for r in rows if r["method"] == "GET" and urlsplit(r["url"]).path == "/mcp"]
        outcomes = {row["outcome"] for row in listening}  # Python's is read to its end
        assert "client_closed" in outcomes and outcomes <= {"complete", "client_closed"}
    code, out = _cli(recorded.data_dir, "triage", "--cassette", "corpus", "--json")
    assert code == 0, out
    assert "upstream_failure" not in out
    assert "Client disconnected" not in out


def test_a_faithful_rerun_is_equivalent_unless_strict(recorded: Recorded) -> None:
    """The rerun differs from the corpus only in the ids the model made up (chatcmpl-, call_
    and the tool_call_id echoing it, msg_, toolu_) and the ids and clocks of the trace export."""
    code, out = _cli(recorded.data_dir, "diff", "corpus", "rerun")
    assert code == 0, out
    assert "corpus and rerun are equivalent" in out
    assert "metadata model-made ids: chatcmpl-1, call_1_0 -> chatcmpl-x91, call_x91_0" in out
    code, out = _cli(recorded.data_dir, "diff", "corpus", "rerun", "--strict")
    assert code == 1, out
    assert "answer model-made ids: chatcmpl-1, call_1_0 -> chatcmpl-x91, call_x91_0" in out
    assert "$.messages[1].tool_calls[0].id" in out


@pytest.fixture
def page(recorded: Recorded, request: pytest.FixtureRequest) -> Iterator[Page]:
    """Chromium on the case file; a failing test leaves a screenshot in test-artifacts/."""
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-proxy-server"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        yield page
        if failed(request.node):
            page.screenshot(path=str(artifact_path(request.node)), full_page=True)
        browser.close()


def _seq(recorded: Recorded, path: str, method: str = "POST") -> int:
    rows = recorded.proxy.admin("GET", "/api/cassettes/corpus").json()
    return next(r["seq"] for r in rows if urlsplit(r["url"]).path == path and r["method"] == method)


def test_the_cassette_list_says_failures_misses_and_fork_origin(
    recorded: Recorded, page: Page
) -> None:
    page.goto(f"{recorded.proxy.admin_url}/cassettes")
    corpus = page.locator('tr.cassette[data-name="corpus"]')
    expect(corpus.locator("td.failed")).to_have_text("2")  # the 429 and the SDK's retry of it
    expect(corpus.locator("td.misses")).to_have_text("1")
    fork = page.locator('tr.cassette[data-name="corpus-fork"]')
    expect(fork.locator(".forked")).to_have_text("forked from corpus up to #0")
    page.screenshot(path=str(artifact_path_named("cassettes")), full_page=True)
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus-fork")
    expect(page.locator("#count")).to_have_text("1 exchange")


def test_the_waterfall_and_the_steps_say_what_each_call_was_and_why_it_failed(
    recorded: Recorded, page: Page
) -> None:
    limited = _seq(recorded, "/ratelimited/full")
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus")
    first = page.locator("#row-0 td.said")
    expect(first).to_contain_text("gpt-4o-mini asks for get_weather")
    expect(page.locator(f"#row-{limited} .said.bad")).to_contain_text(
        "HTTP 429: requests: Rate limit reached"
    )
    box = page.locator("label.check input").bounding_box()
    label = page.locator("label.check").bounding_box()
    assert box and label and label["height"] < 2 * box["height"] + 8, "the label beside its box"
    page.screenshot(path=str(artifact_path_named("run")), full_page=False)

    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus/steps")
    step = page.locator(f"#step-{limited}")
    expect(step).to_have_class(re.compile(r"\bfailed\b"))
    expect(step.locator(".failure")).to_contain_text("HTTP 429")
    expect(page.locator("#step-0")).not_to_have_class(re.compile(r"\bfailed\b"))
    page.locator(f"#step-{limited}").scroll_into_view_if_needed()
    page.screenshot(path=str(artifact_path_named("steps")), full_page=False)


def test_the_misses_page_shows_the_nearest_recording_and_its_values(
    recorded: Recorded, page: Page
) -> None:
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus/misses")
    nearest = page.locator("li.miss .nearest").first
    expect(nearest).to_be_visible()  # no click needed
    expect(nearest).to_contain_text("POST https://localhost")
    expect(nearest).to_contain_text("/v1/chat/completions")
    expect(nearest.locator("table")).to_contain_text("What is the weather in Paris?")
    expect(nearest.locator("table")).to_contain_text(NEW_QUESTION)
    assert "/tool/" not in page.locator("li.miss").first.inner_text()
    page.screenshot(path=str(artifact_path_named("misses")), full_page=False)


def test_an_exchange_page_shows_a_whole_answer_as_the_cli_does(
    recorded: Recorded, page: Page
) -> None:
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus/0")
    expect(page.locator("#stream")).to_have_count(0)  # one whole answer is no stream
    body = page.locator("#response pre.body")
    expect(body).to_contain_text('"choices": [\n')  # indented, as show prints it
    expect(page.locator("#edit-which")).to_contain_text("either")
    expect(page.locator("#edit")).to_contain_text('$.choices[0].message.content="new text"')
    expect(page.locator("#key")).to_contain_text("body:$.user")  # the stripped parts table
    page.screenshot(path=str(artifact_path_named("exchange")), full_page=True)

    gzip = _seq(recorded, "/gzip", "GET")
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus/{gzip}")
    expect(page.locator("#metadata")).to_have_count(0)  # api generic.empty is no provider
    expect(page.locator("#stream")).to_have_count(0)

    streamed = page.locator("#stream h2")
    page.goto(f"{recorded.proxy.admin_url}/cassettes/corpus/2")
    expect(streamed).to_contain_text("chunks over")
    icon = httpx.get(f"{recorded.proxy.admin_url}/favicon.ico", trust_env=False)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


def artifact_path_named(name: str) -> Path:
    """Where a page's screenshot goes for a person to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"real-traffic-{name}.png"


def test_the_whole_corpus_replays_with_no_upstream_reached(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every client again, new ids, clocks and sessions and all: served from ``corpus``."""
    proxy, upstream = recorded.proxy, recorded.upstream
    misses = len(proxy.admin("GET", "/api/cassettes/corpus/misses").json())
    assert proxy.admin("POST", "/api/replay/reset").status_code == 200
    for name in list(os.environ):
        if name.lower() in ("all_proxy", "ssl_cert_dir"):
            monkeypatch.delenv(name)
    for name, value in proxy.client_env(client_bundle(recorded.data_dir)).items():
        monkeypatch.setenv(name, value)
    upstream.reset_counters()
    send_corpus(upstream, recorded.mcp.url)
    assert upstream.connections == 0
    assert len(proxy.admin("GET", "/api/cassettes/corpus/misses").json()) == misses

    # boto3 read a miss as "An error occurred (404) ...: " with nothing after the colon
    # (issue 32): it reads the code from x-amzn-ErrorType and the message from "message".
    asked = [{"role": "user", "content": [{"text": "Weather in Lugano?"}]}]
    with pytest.raises(ClientError) as raised:
        bedrock_client(upstream.base_url).converse(
            modelId=BEDROCK_MODEL, messages=asked, toolConfig={"tools": [BEDROCK_WEATHER]}
        )
    error = raised.value.response["Error"]
    assert error["Code"].startswith("freezeframe"), error
    assert "replay miss in cassette 'corpus'" in error["Message"], error
    assert upstream.connections == 0
