"""The case file at a phone's width (390 px) and a desktop's (1400 px), on hostile names.

The real proxy records an agent (the official openai SDK) into a cassette whose name is as long
as a name may be (128 characters) without a space, under a model name and message text that
carry markup, then into a second cassette that differs at a deep JSON path and by a value of 300
characters without a space; a replay of a third request misses. The
Cassettes, Compare and Misses pages must then not scroll sideways at 390 px (a wide table
scrolls in its own box), a JSON path breaks only between its steps (after a ``.``, before a
``[``), never inside a key, and at 1400 px short values (numbers, times, sequence links,
badges, model names) stay on one line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import trustme
from playwright.sync_api import Browser, Page, ViewportSize, expect, sync_playwright
from support.browser import ARTIFACTS, artifact_path, chromium_or_skip, failed, overflowing
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.proxy.trust import client_bundle

pytestmark = pytest.mark.e2e

#: The longest name a cassette may have (128 characters), without a space.
LONG = ("agent-run-" + "0123456789abcdef" * 8)[:128]
#: A recorded value of 300 characters without a space, as a base64 blob or a digest list is.
BLOB = ("sha256:" + "9f86d081884c7d659a2feaa0c55ad015" * 10)[:300]
OTHER = "replayed-against"
MARKUP = '<b id="pwned">bold</b><img src=x onerror="window.__pwned=1">'
MODEL = "gpt-4o-2024-08-06-ft-orders-lookup-assistant"
#: A key whose path (67 characters) must wrap at 390 px, though the key itself fits a line.
DEEP_KEY = "customer_order_identifier"
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1400, "height": 900}

#: For each element, where its text breaks onto a new line: the characters on either side of
#: every break (found from each character's box), so a test can say which breaks are allowed.
_BREAKS = """(elements) => elements.map((el) => {
  const chars = [];
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      if (box.width > 0 || box.height > 0) chars.push([node.data[i], box.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++) {
    if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0] + "|" + chars[i][0]);
  }
  return {text: el.textContent, breaks};
})"""


@dataclass
class World:
    proxy: ProxyProcess

    @property
    def url(self) -> str:
        return self.proxy.admin_url


def conversation(last: str) -> list[dict[str, Any]]:
    """Four messages, the fourth's text a content part: the miss differs at
    ``$.messages[3].content[0].text``."""
    return [
        {"role": "system", "content": f"You look up orders. {MARKUP}"},
        {"role": "user", "content": "ord_5512"},
        {"role": "assistant", "content": "Looking it up."},
        {"role": "user", "content": [{"type": "text", "text": last}]},
    ]


def tool(key: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {key: {"type": "string"}}},
        },
    }


def ask(client: openai.OpenAI, last: str, key: str = DEEP_KEY) -> None:
    client.chat.completions.create(
        model=MODEL,
        messages=conversation(last),  # type: ignore[arg-type]
        tools=[tool(key)],  # type: ignore[list-item]
    )


@pytest.fixture(scope="module")
def world(
    upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    upstream = Upstream(upstream_ca).start()
    data_dir = tmp_path_factory.mktemp("widths") / "data"
    proxy = ProxyProcess(data_dir, mode="record", cassette=LONG, upstream_ca=upstream_ca_file)
    try:
        proxy.start()
        bundle = client_bundle(data_dir)
        with pytest.MonkeyPatch.context() as env:
            for name in list(os.environ):
                if name.lower() in ("all_proxy", "ssl_cert_dir"):
                    env.delenv(name)
            for name, value in proxy.client_env(bundle).items():
                env.setenv(name, value)
            base = f"{upstream.base_url}/v1"
            with openai.OpenAI(base_url=base, api_key="sk-widths", max_retries=0) as client:
                ask(client, f"Where is it? {MARKUP}")
                ask(client, "And when does it arrive?")
                proxy.stored(LONG, 2)
                mode = {"mode": "record", "cassette": OTHER}
                assert proxy.admin("PUT", "/api/mode", json=mode).status_code == 200
                ask(client, f"Where is it? {MARKUP}", key=DEEP_KEY + "_v2")
                ask(client, BLOB)
                proxy.stored(OTHER, 2)
                mode = {"mode": "replay", "cassette": LONG, "pace": "instant"}
                assert proxy.admin("PUT", "/api/mode", json=mode).status_code == 200
                with pytest.raises(openai.APIStatusError):
                    ask(client, f"Where was it? {MARKUP}", key=DEEP_KEY + "_v2")
        yield World(proxy)
    finally:
        proxy.kill()
        upstream.stop()


@pytest.fixture(scope="module")
def browser(world: World) -> Iterator[Browser]:
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        yield playwright.chromium.launch(executable_path=executable, args=["--no-proxy-server"])


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    yield page
    if failed(request.node):
        page.screenshot(path=str(artifact_path(request.node)), full_page=True)
    context.close()


def pages(world: World) -> dict[str, str]:
    return {
        "cassettes": f"{world.url}/cassettes",
        "compare": f"{world.url}/compare?a={LONG}&b={OTHER}",
        "misses": f"{world.url}/cassettes/{LONG}/misses",
    }


def loaded(page: Page, name: str) -> None:
    """Wait for what each page is about: the long cassette's row, the verdict, the miss."""
    if name == "cassettes":
        expect(page.locator("tr.cassette")).to_have_count(2)
    elif name == "compare":
        expect(page.locator("#verdict")).to_contain_text("diverge")
    else:
        expect(page.locator("li.miss")).to_have_count(1)
        expect(page.locator("li.miss .nearest table.kv").first).to_be_visible()


def snapshot(page: Page, name: str, width: int) -> None:
    """Keep each page's look at each width under test-artifacts/ for a person to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"widths-{name}-{width}.png"), full_page=True)


@pytest.mark.parametrize("name", ["cassettes", "compare", "misses"])
def test_a_phone_never_scrolls_the_page_sideways(world: World, page: Page, name: str) -> None:
    page.set_viewport_size(PHONE)
    page.goto(pages(world)[name])
    loaded(page, name)
    snapshot(page, name, PHONE["width"])
    wide = page.evaluate(
        "() => [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"
    )
    assert wide[0] <= wide[1], (wide, overflowing(page))
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#pwned").count() == 0


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1400"])
def test_a_json_path_breaks_only_between_its_steps(
    world: World, page: Page, viewport: ViewportSize
) -> None:
    page.set_viewport_size(viewport)
    page.goto(pages(world)["misses"])
    loaded(page, "misses")
    paths = page.locator("li.miss table.kv td:first-child code")
    texts = paths.all_text_contents()
    assert "$.messages[3].content[0].text" in texts, texts
    assert any(DEEP_KEY in text for text in texts), texts
    found = paths.evaluate_all(_BREAKS)
    for each in found:
        wrong = [b for b in each["breaks"] if not (b[0] == "." or b[2] == "[")]
        assert wrong == [], f"{each['text']} breaks inside a key: {each['breaks']}"
    if viewport == PHONE:
        deep = next(each for each in found if DEEP_KEY in each["text"])
        assert deep["breaks"], "at 390 px the long path must wrap, at its dots"
    snapshot(page, "misses-paths", viewport["width"])


#: Short values, each of which must sit on one line at a desktop's width.
SHORT = {
    "cassettes": "tr.cassette td.num, tr.cassette td.time, tr.cassette .badge",
    "compare": "tr.pair td:nth-child(-n+5)",
    "misses": "li.miss .time, li.miss .badge, li.miss a[href*='/cassettes/']",
}


@pytest.mark.parametrize("name", ["cassettes", "compare", "misses"])
def test_short_values_stay_on_one_line_on_a_desktop(world: World, page: Page, name: str) -> None:
    page.goto(pages(world)[name])
    loaded(page, name)
    snapshot(page, name, DESKTOP["width"])
    cells = page.locator(SHORT[name])
    assert cells.count() >= 3, SHORT[name]
    found = cells.evaluate_all(_BREAKS)
    wrapped = [each for each in found if each["breaks"]]
    assert wrapped == [], wrapped
