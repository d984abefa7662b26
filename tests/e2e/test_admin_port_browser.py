"""The admin port against a hostile page, in a real browser (Debian's chromium, Playwright)
and a real proxy: once with no token (the loopback default), once with one and the user
signed in to the case file in the same browser.

The hostile page is served by a tiny server on another port of 127.0.0.1: another origin,
but the same *site*, so the browser sends the case file's SameSite=Strict cookies along
(the hardest case). It tries to switch the mode with ``fetch`` (CORS), ``fetch`` in
``no-cors`` mode, and HTML form posts, and to read the API. Then the same ``PUT`` from the
case file's own page succeeds, which shows that the browser was able to, and was refused
for where the request came from. A name re-pointed at 127.0.0.1 (DNS rebinding, made with
chromium's ``--host-resolver-rules``) gets a 421 page.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from support.browser import artifact_path, chromium_or_skip, failed
from support.proxy import ProxyProcess

pytestmark = pytest.mark.e2e

TOKEN = "browser-admin-token-5e8d1c"
REBOUND = "rebound.test"
"""A name that resolves to 127.0.0.1 in the browser, as a rebound attacker's name would."""


@pytest.fixture(scope="module", params=["open", "token"])
def proxy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    data_dir = tmp_path_factory.mktemp(f"admin-{request.param}") / "data"
    env = {"FREEZEFRAME_ADMIN_TOKEN": TOKEN} if request.param == "token" else {}
    started = ProxyProcess(data_dir, mode="replay", cassette="orders", env=env)
    try:
        yield started.start()
    finally:
        started.kill()


def token_of(proxy: ProxyProcess) -> str | None:
    return proxy.env.get("FREEZEFRAME_ADMIN_TOKEN")


def mode_of(proxy: ProxyProcess) -> dict[str, Any]:
    token = token_of(proxy)
    headers = {"authorization": f"Bearer {token}"} if token else {}
    answer = proxy.admin("GET", "/api/mode", headers=headers)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        yield playwright.chromium.launch(
            executable_path=executable,
            args=["--no-proxy-server", f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"],
        )


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page (own cookies), screenshotted into test-artifacts/ when its test fails."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    yield page
    if failed(request.node):
        page.screenshot(path=str(artifact_path(request.node)), full_page=True)
    context.close()


def sign_in(page: Page, proxy: ProxyProcess) -> None:
    """As a person would: the case file sends them to its login form; a wrong token is
    refused, the right one opens the page they asked for."""
    token = token_of(proxy)
    page.goto(f"{proxy.admin_url}/cassettes")
    if token is None:
        expect(page).to_have_url(f"{proxy.admin_url}/cassettes")
        return
    expect(page).to_have_url(f"{proxy.admin_url}/login?next=%2Fcassettes")
    page.locator("input[name=token]").fill("not-the-token-at-all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#problem")).to_contain_text("not the admin token")
    page.locator("input[name=token]").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{proxy.admin_url}/cassettes")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


class _Hostile(BaseHTTPRequestHandler):
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
    """A page on another port that tries to switch the mode to ``record`` every way a page
    can, and to read the API; it notes what its script saw in ``window.results``."""

    def __init__(self, admin: str) -> None:
        script = f"""
const admin = {json.dumps(admin)};
const body = JSON.stringify({{mode: "record"}});
const results = {{}};
const attempt = async (name, run) => {{
  try {{ results[name] = await run(); }} catch (error) {{ results[name] = "blocked"; }}
}};
(async () => {{
  await attempt("put", async () => (await fetch(admin + "/api/mode", {{method: "PUT",
    credentials: "include", headers: {{"content-type": "application/json"}}, body}})).status);
  await attempt("put-no-cors", async () => (await fetch(admin + "/api/mode", {{method: "PUT",
    mode: "no-cors", credentials: "include", body}})).type);
  await attempt("post-no-cors", async () => (await fetch(admin + "/api/mode", {{
    method: "POST", mode: "no-cors", credentials: "include",
    headers: {{"content-type": "text/plain"}}, body}})).type);
  await attempt("reset-no-cors", async () => (await fetch(admin + "/api/replay/reset", {{
    method: "POST", mode: "no-cors", credentials: "include"}})).type);
  await attempt("read", async () => await (await fetch(admin + "/api/cassettes",
    {{credentials: "include"}})).text());
  await attempt("read-mode", async () => await (await fetch(admin + "/api/mode",
    {{credentials: "include"}})).text());
  await attempt("read-no-cors", async () => {{
    const answer = await fetch(admin + "/api/mode", {{mode: "no-cors", credentials: "include"}});
    return answer.type + ":" + (await answer.text());
  }});
  window.results = results;
  for (const form of document.forms) form.submit();
  document.title = "tried";
}})();
"""
        forms = "".join(
            f'<iframe name="sink{n}"></iframe>'
            f'<form method="post" action="{admin}{path}" enctype="{kind}" target="sink{n}">'
            f"<input name=\"{name}\" value='{value}'></form>"
            for n, (path, kind, name, value) in enumerate(
                [
                    ("/api/mode", "text/plain", '{"mode": "record", "x": "', '"}'),
                    ("/api/mode", "application/x-www-form-urlencoded", "mode", "record"),
                    ("/api/replay/reset", "application/x-www-form-urlencoded", "x", "1"),
                ]
            )
        )
        _Hostile.page = f"<!doctype html><body>{forms}<script>{script}</script></body>".encode()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_page_on_another_origin_cannot_switch_the_mode_or_read_the_api(
    proxy: ProxyProcess, page: Page
) -> None:
    sign_in(page, proxy)
    before = mode_of(proxy)
    assert before["mode"] == "replay"
    sent: list[tuple[str, str]] = []
    answered: list[tuple[str, str, int]] = []
    page.on(
        "request",
        lambda r: sent.append((r.method, r.url)) if r.url.startswith(proxy.admin_url) else None,
    )
    page.on(
        "response",
        lambda r: (
            answered.append((r.request.method, r.url, r.status))
            if r.url.startswith(proxy.admin_url)
            else None
        ),
    )
    with hostile_site(proxy.admin_url) as evil:
        with page.expect_response(lambda r: r.url.endswith("/api/replay/reset")):
            page.goto(evil)
            expect(page).to_have_title("tried", timeout=10_000)
        results = page.evaluate("window.results")
        page.wait_for_load_state("networkidle")

    assert results["put"] == "blocked"  # its CORS preflight is refused: the PUT gets no answer
    assert results["put-no-cors"] == "blocked"  # a browser sends no PUT without CORS
    assert results["read"] == "blocked" and results["read-mode"] == "blocked"
    # Not even an opaque answer: Cross-Origin-Resource-Policy: same-origin drops it.
    assert results["read-no-cors"] == "blocked"
    assert not [a for a in answered if a[0] == "PUT"], answered
    # The two no-cors posts and the three forms did reach the port, and were refused.
    assert len([s for s in sent if s[0] == "POST"]) == 5, sent
    writes = [(method, url, status) for method, url, status in answered if method != "GET"]
    assert writes and all(status in (401, 403, 405) for _, _, status in writes), writes
    assert mode_of(proxy) == before

    # The same PUT from the case file's own page, with its CSRF token, does switch the mode.
    page.goto(f"{proxy.admin_url}/cassettes")
    status = page.evaluate(
        """async () => {
  const headers = JSON.parse(document.body.getAttribute("hx-headers"));
  headers["content-type"] = "application/json";
  const answer = await fetch("/api/mode", {method: "PUT", headers,
    body: JSON.stringify({mode: "record"})});
  return answer.status;
}"""
    )
    assert status == 200 and mode_of(proxy)["mode"] == "record"
    proxy.admin(
        "PUT",
        "/api/mode",
        json={"mode": "replay"},
        headers={"authorization": f"Bearer {token_of(proxy)}"} if token_of(proxy) else {},
    )


def test_a_rebound_name_gets_only_the_status_and_signing_out_locks_the_case_file(
    proxy: ProxyProcess, page: Page
) -> None:
    sign_in(page, proxy)
    rebound = f"http://{REBOUND}:{proxy.admin_port}"
    for path in ("/cassettes", "/api/mode", "/metrics"):
        answer = page.goto(f"{rebound}{path}")
        assert answer is not None and answer.status == 421, path
        expect(page.locator("body")).to_contain_text("--admin-host")
    health = page.goto(f"{rebound}/health")
    assert health is not None and health.json() == {
        "status": "ok",
        **({"admin_token": "required"} if token_of(proxy) else {}),
    }
    if token_of(proxy) is not None:
        page.goto(f"{proxy.admin_url}/cassettes")
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(f"{proxy.admin_url}/login")
        page.goto(f"{proxy.admin_url}/cassettes/orders")
        expect(page).to_have_url(f"{proxy.admin_url}/login?next=%2Fcassettes%2Forders")
