"""The case file in a real browser, on a run recorded by the real proxy.

An order-lookup agent (the official openai SDK, streaming) asks the model, which requests a
tool; the agent runs the tool over HTTP, hits a rate limit whose 429 is cut off mid-body,
and sends the tool's result back to the model. One proxy records that run and then serves
the case file while the tests read it the way a person would: the step tree, the cut-off
429, the stream chart, search, misses arriving during a replay, hostile recorded text,
fork and edit from the browser, and a page on another origin that tries to post to it.

Set ``FREEZEFRAME_DOCS_SCREENSHOTS=1`` to also write docs/casefile.md's screenshots to ``docs/``.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trustme
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright
from support.browser import artifact_path, chromium_or_skip, failed
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.trust import client_bundle

pytestmark = pytest.mark.e2e

CASSETTE = "orders"
ORDER = "ord_5512"
HOSTILE = "<script>window.__pwned = 1; alert(1)</script>"
HOSTILE_RUN = '<img src=x onerror="window.__pwned=2">'
DOCS = Path(__file__).parents[2] / "docs"
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its id",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


@dataclass
class World:
    """The recorded run, the proxy serving its case file, and what the agent saw."""

    proxy: ProxyProcess
    upstream: Upstream
    bundle: Path
    seen: dict[str, Any]
    seqs: dict[str, int]
    """Which exchange did what: model, tool, hostile, ratelimited, final."""

    @property
    def verify(self) -> ssl.SSLContext:
        """Trust for an agent talking through the proxy."""
        return ssl.create_default_context(cafile=str(self.bundle))

    @property
    def url(self) -> str:
        return self.proxy.admin_url

    def document(self, path: str) -> Any:
        return self.proxy.admin("GET", path).json()


def order_agent(base: str) -> dict[str, Any]:
    """Stream the model's answer, run the lookup it asks for, note what the tool said, try
    a rate-limited call once, then send the tool's result back for the final answer."""
    seen: dict[str, Any] = {}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You look up orders. Use the tool."},
        {"role": "user", "content": ORDER},
    ]
    with (
        openai.OpenAI(base_url=f"{base}/v1", api_key="sk-casefile", max_retries=0) as client,
        httpx.Client(timeout=10) as http,
    ):
        with client.chat.completions.stream(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=[LOOKUP],  # type: ignore[list-item]
        ) as stream:
            asked = stream.get_final_completion()
        calls = asked.choices[0].message.tool_calls or []
        seen["calls"] = [(c.id, c.function.name, c.function.arguments) for c in calls]  # type: ignore[union-attr]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in seen["calls"]
                ],
            }
        )
        for call_id, _, arguments in seen["calls"]:
            order = json.loads(arguments)["order_id"]
            answer = http.get(f"{base}/tool/counter", params={"order_id": order})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": answer.text})
        http.get(f"{base}/tool/counter", params={"note": HOSTILE})
        try:
            http.post(f"{base}/v1/ratelimited", json={"model": "gpt-4o"})
        except httpx.HTTPError as exc:
            seen["ratelimited"] = type(exc).__name__
        final = client.chat.completions.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=[LOOKUP],  # type: ignore[list-item]
            stream=True,
            extra_headers={"X-Freezeframe-Run-Id": HOSTILE_RUN},
        )
        with final:
            seen["text"] = "".join(c.choices[0].delta.content or "" for c in final if c.choices)
    return seen


@pytest.fixture(scope="module")
def world(
    upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    upstream = Upstream(upstream_ca).start()
    data_dir = tmp_path_factory.mktemp("casefile") / "data"
    proxy = ProxyProcess(data_dir, mode="record", cassette=CASSETTE, upstream_ca=upstream_ca_file)
    try:
        proxy.start()
        bundle = client_bundle(data_dir)
        with pytest.MonkeyPatch.context() as env:
            for name in list(os.environ):
                if name.lower() in ("all_proxy", "ssl_cert_dir"):
                    env.delenv(name)
            for name, value in proxy.client_env(bundle).items():
                env.setenv(name, value)
            seen = order_agent(upstream.base_url)
        assert seen.get("ratelimited"), "the cut-off 429 must fail the client's read"
        assert f"case file: {proxy.admin_url}/" in proxy.log
        switched = proxy.admin("PUT", "/api/mode", json={"mode": "replay", "pace": "instant"})
        assert switched.status_code == 200
        rows = proxy.admin("GET", f"/cassettes/{CASSETTE}.json").json()
        seqs: dict[str, int] = {}
        for row in rows:
            path = httpx.URL(row["url"]).path
            query = httpx.URL(row["url"]).query.decode()
            if path == "/v1/chat/completions":
                seqs.setdefault("model", row["seq"])
                seqs["final"] = row["seq"]
            elif path == "/v1/ratelimited":
                seqs["ratelimited"] = row["seq"]
            elif "note=" in query:
                seqs["hostile"] = row["seq"]
            else:
                seqs["tool"] = row["seq"]
        assert len(rows) == 5 and len(seqs) == 5, rows
        yield World(proxy, upstream, bundle, seen, seqs)
    finally:
        proxy.kill()
        upstream.stop()


@pytest.fixture(scope="module")
def browser(world: World) -> Iterator[Browser]:
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        yield launch(playwright, executable)


def launch(playwright: Playwright, executable: str) -> Browser:
    return playwright.chromium.launch(executable_path=executable, args=["--no-proxy-server"])


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page (own cookies) that records dialogs and CSP violations, screenshotted
    into test-artifacts/ when its test fails."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))  # type: ignore[attr-defined]
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text)
            if "Content Security Policy" in message.text and world_url(request) in page.url
            else None
        ),
    )
    yield page
    assert refused == [], "the case file's own pages must work under its CSP"
    if failed(request.node):
        page.screenshot(path=str(artifact_path(request.node)), full_page=True)
    context.close()


def world_url(request: pytest.FixtureRequest) -> str:
    world: World = request.getfixturevalue("world")
    return world.url


def docs_screenshot(page: Page, name: str) -> None:
    if os.environ.get("FREEZEFRAME_DOCS_SCREENSHOTS") == "1":
        DOCS.mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS / f"casefile-{name}.png"), full_page=False)


def test_the_step_tree_links_the_tool_call_and_the_stream_and_the_cut_off_429_show(
    world: World, page: Page
) -> None:
    model, tool, final = world.seqs["model"], world.seqs["tool"], world.seqs["final"]
    page.goto(f"{world.url}/")
    expect(page).to_have_url(f"{world.url}/cassettes")
    page.get_by_role("link", name=CASSETTE, exact=True).click()
    expect(page.locator("tr.exchange")).to_have_count(5)
    limited = page.locator(f"#row-{world.seqs['ratelimited']}")
    expect(limited.locator(".badge.s429")).to_have_text("429")
    expect(limited.locator(".badge.outcome-truncated")).to_have_text("truncated")
    docs_screenshot(page, "run")

    page.get_by_role("link", name="Agent steps").first.click()
    step = page.locator(f"#step-{model}")
    (call_id, name, _arguments) = world.seen["calls"][0]
    expect(step.locator(".call .callname")).to_have_text(name)
    result = step.locator(".call .result")
    expect(result.locator("a.link")).to_have_text(f"#{final}")
    expect(result.locator(".badge")).to_have_text("exact")
    expect(result.locator(".why")).to_contain_text(call_id)
    expect(step.locator(".call .executed a.link")).to_have_text(f"#{tool}")
    expect(page.locator(f"#step-{tool} .executes")).to_contain_text(f"#{model}")
    docs_screenshot(page, "steps")

    recorded = world.document(f"/cassettes/{CASSETTE}/{model}.json")
    chunks = len(recorded["response"]["chunks"])
    assert chunks > 3, "a streamed answer arrives in many chunks"
    page.goto(f"{world.url}/cassettes/{CASSETTE}/{model}")
    expect(page.locator("#chunk-count")).to_have_text(str(chunks))
    expect(page.locator("svg.chart rect.chunk")).to_have_count(chunks)
    expect(page.locator("#answer .callname")).to_have_text(name)
    expect(page.locator("#conversation .role-system pre")).to_have_text(
        "You look up orders. Use the tool."
    )
    docs_screenshot(page, "exchange")
    headers = page.locator("#request table.headers")
    expect(headers).to_contain_text("[redacted:")
    assert "sk-casefile" not in page.content(), "a secret must appear only as its marker"

    cut = world.document(f"/cassettes/{CASSETTE}/{world.seqs['ratelimited']}.json")
    partial = cut["response"]["body"]["text"]
    assert cut["outcome"] == "truncated" and partial and not partial.rstrip().endswith("}")
    page.goto(f"{world.url}/cassettes/{CASSETTE}/{world.seqs['ratelimited']}")
    expect(page.locator("h1 + nav + p .badge.outcome-truncated")).to_have_text("truncated")
    expect(page.locator("#response pre.body")).to_have_text(partial)
    expect(page.locator("#response h2")).to_contain_text("429")
    expect(page.locator("svg.chart line.cut")).to_have_count(1)


def test_search_finds_the_tools_answer_and_recorded_script_stays_text(
    world: World, page: Page
) -> None:
    page.goto(f"{world.url}/search")
    page.locator("input[name=q]").fill(ORDER)
    page.get_by_role("button", name="Search").click()
    tool_link = page.locator(f'a[href="/cassettes/{CASSETTE}/{world.seqs["tool"]}"]')
    hit = page.locator("tr.hit", has=tool_link)
    expect(hit).to_have_count(1)
    expect(hit.locator("td").nth(3)).to_contain_text("response")
    docs_screenshot(page, "search")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the match still shows whole
    match = hit.locator("code").bounding_box()
    assert match is not None and match["x"] + match["width"] <= 390, match
    page.set_viewport_size({"width": 1400, "height": 900})

    page.goto(f"{world.url}/cassettes/{CASSETTE}/{world.seqs['hostile']}")
    expect(page.locator("#response pre.body")).to_contain_text(HOSTILE)
    page.goto(f"{world.url}/cassettes/{CASSETTE}?group=run_id")
    expect(page.locator("tr.grouphead").last).to_contain_text(HOSTILE_RUN)
    page.goto(f"{world.url}/cassettes/{CASSETTE}/{world.seqs['final']}")
    # Any hint may come first: a streamed answer the SDK closed after [DONE] has its own.
    expect(page.locator("p.hint").filter(has_text=HOSTILE_RUN)).to_have_count(1)
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_a_miss_shows_up_while_the_replay_runs_and_a_new_cassette_while_recording(
    world: World, page: Page
) -> None:
    page.goto(f"{world.url}/cassettes/{CASSETTE}/misses")
    expect(page.locator("li.miss")).to_have_count(0)
    with httpx.Client(proxy=world.proxy.url, verify=world.verify, timeout=10) as agent:
        missed = agent.get(f"{world.upstream.base_url}/tool/counter", params={"order_id": "ord_9"})
    assert missed.status_code >= 400
    expect(page.locator("li.miss")).to_have_count(1, timeout=10_000)
    expect(page.locator("li.miss").first).to_contain_text("ord_9")
    docs_screenshot(page, "misses")

    page.goto(f"{world.url}/cassettes")
    expect(page.locator("tr.cassette[data-name=live-run]")).to_have_count(0)
    world.proxy.admin("PUT", "/api/mode", json={"mode": "record", "cassette": "live-run"})
    try:
        with httpx.Client(proxy=world.proxy.url, verify=world.verify, timeout=10) as agent:
            agent.get(f"{world.upstream.base_url}/tool/counter", params={"live": "1"})
        expect(page.locator("tr.cassette[data-name=live-run] .exchanges")).to_have_text(
            "1", timeout=10_000
        )
    finally:
        world.proxy.admin("PUT", "/api/mode", json={"mode": "replay", "cassette": CASSETTE})
    docs_screenshot(page, "cassettes")


def test_fork_and_edit_from_the_browser_and_no_other_origin_can(world: World, page: Page) -> None:
    tool = world.seqs["tool"]
    page.goto(f"{world.url}/cassettes/{CASSETTE}/{tool}")
    page.locator("#edit summary").click()
    page.locator("#edit input[name=into]").fill("orders-fixed")
    page.locator("#edit textarea[name=body]").fill('{"count": 1, "echo": {"order_id": "ord_1"}}')
    page.get_by_role("button", name="Edit into a fork").click()
    expect(page).to_have_url(f"{world.url}/cassettes/orders-fixed/{tool}")
    expect(page.locator("#edited")).to_contain_text("body replaced")
    expect(page.locator("#response pre.body")).to_have_text(  # pretty, as show prints it
        json.dumps({"count": 1, "echo": {"order_id": "ord_1"}}, indent=2)
    )
    original = world.document(f"/cassettes/{CASSETTE}/{tool}.json")
    assert ORDER in original["response"]["body"]["text"]

    page.goto(f"{world.url}/cassettes/{CASSETTE}")
    page.locator("#fork summary").click()
    page.locator("#fork input[name=into]").fill("orders-copy")
    page.locator("#fork input[name=upto]").fill(str(tool))
    page.get_by_role("button", name="Fork").click()
    expect(page).to_have_url(f"{world.url}/cassettes/orders-copy")
    expect(page.locator("tr.exchange")).to_have_count(tool + 1)

    page.goto(f"{world.url}/compare?a={CASSETTE}&b=orders-fixed")
    expect(page.locator("#verdict")).to_contain_text("diverge")
    docs_screenshot(page, "compare")

    with hostile_site(world.url) as evil:
        page.goto(evil)
        page.wait_for_url(f"{world.url}/api/cassettes/{CASSETTE}/fork", timeout=10_000)
        assert "refused" in page.content()
    names = [c["name"] for c in world.document("/cassettes.json")]
    assert not [name for name in names if name.startswith("pwned")], names
    assert world.document("/api/mode")["mode"] == "replay"


class _Evil(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        return


class hostile_site:  # noqa: N801 (used as a context manager, like open)
    """A page on another origin that tries every way a page can to change the case file:
    fetch with JSON (needs CORS), fetch in no-cors mode, then a form post."""

    def __init__(self, admin: str) -> None:
        script = f"""
const admin = {json.dumps(admin)};
const post = (path, body, type) => fetch(admin + path, {{method: "POST", mode: "no-cors",
  credentials: "include", headers: {{"content-type": type}}, body}}).catch(() => null);
const put = fetch(admin + "/api/mode", {{method: "PUT", credentials: "include",
  headers: {{"content-type": "application/json"}}, body: '{{"mode": "record"}}'}})
  .catch(() => null);
Promise.all([put,
  post("/api/cassettes/{CASSETTE}/fork", '{{"into": "pwned-1"}}', "text/plain"),
  post("/api/replay/reset", "", "text/plain"),
  post("/api/cassettes/{CASSETTE}/fork", "into=pwned-2", "application/x-www-form-urlencoded"),
]).then(() => document.forms[0].submit());
"""
        form = (
            f'<form method="post" action="{admin}/api/cassettes/{CASSETTE}/fork">'
            '<input name="into" value="pwned-3"><input name="csrf_token" value="guess"></form>'
        )
        _Evil.page = f"<!doctype html><body>{form}<script>{script}</script></body>".encode()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Evil)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
