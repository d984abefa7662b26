"""The case file in-process (the admin app over a real SQLite store, through
``httpx.ASGITransport``): every page's JSON twin is the document ``show --json`` prints,
recorded bytes are inert on every page, and only the case file itself can change things."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from freezeframe import cli
from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.canonicalize import RequestView, canonicalize
from freezeframe.canonicalize.drift import digests
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.admin.casefile import PAGE_ROWS, templates
from freezeframe.proxy.admin.guard import CONTENT_SECURITY_POLICY, CSRF_COOKIE
from freezeframe.proxy.keys import key_config
from freezeframe.proxy.settings import Address, Settings
from freezeframe.storage import (
    Chunk,
    Message,
    NewExchange,
    Outcome,
    RecordedResponse,
    Store,
    open_store,
)

ADMIN = "127.0.0.1:8081"
HOSTILE = "<script>alert(1)</script>"
ANSWER = json.dumps({"choices": [{"message": {"content": HOSTILE}}], "order": "ord_5512"})


def record(
    store: Store,
    cassette: str,
    count: int,
    *,
    status: int = 200,
    answer: bytes | None = None,
    outcome: Outcome = Outcome.COMPLETE,
    **extra: Any,
) -> None:
    """``count`` exchanges written as the proxy writes them: key from canonicalize;
    ``extra`` sets any other field of each."""
    for n in range(count):
        body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": n}]})
        view = RequestView(
            method="POST",
            scheme="https",
            host="api.openai.com",
            port=443,
            path="/v1/chat/completions",
            query=(),
            headers=(),
            body=body.encode(),
            content_type="application/json",
        )
        canonical = canonicalize(view, key_config())
        answered = answer if answer is not None else ANSWER.encode()
        store.submit(
            NewExchange(
                cassette=cassette,
                key=canonical.key,
                key_scheme=1,
                canonical=canonical.form,
                method="POST",
                scheme="https",
                host="api.openai.com",
                port=443,
                path="/v1/chat/completions",
                http_version="HTTP/1.1",
                request_headers=((b"content-type", b"application/json"),),
                request_body=body.encode(),
                started_at=1_790_000_000.0 + n,
                duration=0.25,
                response=RecordedResponse(
                    status=status,
                    reason="OK",
                    http_version="HTTP/1.1",
                    headers=((b"content-type", b"application/json"),),
                    body=answered,
                    chunks=(Chunk(0, 0.2), Chunk(len(answered) // 2, 0.22)),
                    first_byte_at=0.2,
                ),
                outcome=outcome,
                error=None,
                context={"run-id": f"run-{n % 2}"},
                slot=store.reserve(cassette, canonical.key),
                stripped=digests(canonical.stripped),
                **extra,
            )
        )
    store.flush()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    with open_store(f"sqlite:///{tmp_path / 'freezeframe.db'}") as store:
        record(store, "bug-8821", 3)
        record(store, "rate", 1, status=429, answer=b'{"error": {"mess', outcome=Outcome.TRUNCATED)
    yield tmp_path


@pytest.fixture
def client(data_dir: Path) -> Iterator[TestClient]:
    store = open_store(f"sqlite:///{data_dir / 'freezeframe.db'}")
    settings = Settings(data_dir=data_dir, admin=Address.parse(ADMIN, "admin"))
    app = create_app(store, RuntimeState(Mode.REPLAY, "bug-8821"), settings)
    with TestClient(app, base_url=f"http://{ADMIN}", follow_redirects=False) as client:
        yield client
    store.close()


def show_json(data_dir: Path, *args: str) -> object:
    result = CliRunner().invoke(
        cli.main, ["show", *args, "--json", "--data-dir", str(data_dir)], catch_exceptions=False
    )
    return json.loads(result.stdout)


def test_every_page_has_a_json_twin_equal_to_show_json(client: TestClient, data_dir: Path) -> None:
    listing = (client.get("/cassettes/bug-8821.json")).json()
    assert listing == show_json(data_dir, "bug-8821")
    one = client.get("/cassettes/bug-8821/1", headers={"accept": "application/json"})
    assert one.json() == show_json(data_dir, "bug-8821", "1")
    assert (client.get("/cassettes/bug-8821/1.json")).json() == one.json()
    cassettes = (client.get("/cassettes.json")).json()
    assert cassettes == (client.get("/api/cassettes")).json()
    assert [c["name"] for c in cassettes] == ["bug-8821", "rate"]
    filtered = (client.get("/cassettes/bug-8821.json?run_id=run-1")).json()
    assert [row["seq"] for row in filtered] == [1]
    steps = (client.get("/cassettes/bug-8821/steps.json")).json()
    assert [step["seq"] for step in steps["steps"]] == [0, 1, 2]
    hits = (client.get("/search.json?q=ord_5512")).json()
    assert {(hit["cassette"], hit["seq"]) for hit in hits} == {
        ("bug-8821", 0),
        ("bug-8821", 1),
        ("bug-8821", 2),
    }
    compared = (client.get("/compare.json?a=bug-8821@run-0&b=bug-8821@run-1")).json()
    assert compared["a"] == "bug-8821@run-0" and "steps" in compared


def test_the_search_page_counts_its_hits_in_words(client: TestClient) -> None:
    page = {"accept": "text/html"}
    assert "3 exchanges hold “ord_5512”" in client.get("/search?q=ord_5512", headers=page).text
    one = (client.get("/search.json?q=run-1")).json()
    assert len(one) == 1
    assert "1 exchange holds “run-1”" in client.get("/search?q=run-1", headers=page).text


def test_pages_render_recorded_bytes_as_text_under_a_strict_csp(
    client: TestClient,
) -> None:
    for path in (
        "/cassettes",
        "/cassettes/bug-8821",
        "/cassettes/bug-8821/steps",
        "/cassettes/bug-8821/0",
        "/cassettes/bug-8821/misses",
        "/search?q=ord_5512",
        "/compare?a=bug-8821&b=rate",
    ):
        page = client.get(path, headers={"accept": "text/html"})
        assert page.status_code == 200, (path, page.text)
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "<script>alert" not in page.text, path
        assert "access-control-allow-origin" not in page.headers
        assert re.findall(r"<script[^>]*>", page.text) == [
            '<script src="/static/htmx-2.0.7.min.js" defer>'
        ], path
    shown = (client.get("/cassettes/bug-8821/0")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown


def test_the_waterfall_shows_each_calls_tokens_under_either_apis_names(tmp_path: Path) -> None:
    chat = {"usage": {"prompt_tokens": 12, "completion_tokens": 3}}
    responses = {"usage": {"input_tokens": 40, "output_tokens": 7, "total_tokens": 47}}
    settings = Settings(data_dir=tmp_path, admin=Address.parse(ADMIN, "admin"))
    with open_store(f"sqlite:///{tmp_path / 'freezeframe.db'}") as store:
        record(store, "chat", 1, facts=chat)
        record(store, "responses", 1, facts=responses)
        app = create_app(store, RuntimeState(Mode.REPLAY, "chat"), settings)
        with TestClient(app, base_url=f"http://{ADMIN}") as client:
            assert "12 / 3" in client.get("/cassettes/chat").text
            assert "40 / 7" in client.get("/cassettes/responses").text


def test_a_truncated_answer_shows_its_partial_body_and_outcome(
    client: TestClient,
) -> None:
    page = (client.get("/cassettes/rate/0")).text
    assert "{&#34;error&#34;: {&#34;mess" in page
    assert "outcome-truncated" in page and "cut off" in page
    waterfall = (client.get("/cassettes/rate")).text
    assert "s429" in waterfall and "outcome-truncated" in waterfall


def test_a_browser_is_sent_to_the_case_file_and_a_script_gets_the_index(
    client: TestClient,
) -> None:
    browser = client.get("/", headers={"accept": "text/html,*/*"})
    assert browser.status_code == 303 and browser.headers["location"] == "/cassettes"
    assert "routes" in (client.get("/")).json()


def test_a_script_may_post_without_a_token_and_a_cross_site_page_may_not(
    client: TestClient,
) -> None:
    assert (client.post("/api/replay/reset")).status_code == 200
    assert (client.put("/api/mode", json={"pace": "instant"})).status_code == 200
    forked = client.post("/api/cassettes/bug-8821/fork", json={"into": "f1", "upto": 1})
    assert forked.status_code == 201 and forked.json()["exchanges"] == 2
    attacks = [
        {"origin": "https://evil.example", "content-type": "application/x-www-form-urlencoded"},
        {"sec-fetch-site": "cross-site", "content-type": "text/plain"},
        {"content-type": "application/x-www-form-urlencoded"},
        {"host": "evil.example:8081", "content-type": "application/json"},
    ]
    for headers in attacks:
        # 421: a Host that is not the admin port's is refused before any route (rebinding)
        expected = 421 if "host" in headers else 403
        for path in ("/api/replay/reset", "/api/cassettes/bug-8821/fork"):
            refused = client.post(path, headers=headers, content=b'{"into": "f2"}')
            assert refused.status_code == expected, (headers, path)
        assert (client.put("/api/mode", headers=headers, content=b"{}")).status_code == expected
    names = [c["name"] for c in (client.get("/cassettes.json")).json()]
    assert "f2" not in names


def test_the_case_files_forms_fork_and_edit_with_their_token(
    client: TestClient, data_dir: Path
) -> None:
    page = client.get("/cassettes/bug-8821/2")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None and client.cookies[CSRF_COOKIE] == token.group(1)
    same_site = {"origin": f"http://{ADMIN}", "sec-fetch-site": "same-origin"}
    without = client.post(
        "/api/cassettes/bug-8821/2/edit", data={"into": "x", "status": "500"}, headers=same_site
    )
    assert without.status_code == 403
    bad_json = client.post(
        "/api/cassettes/bug-8821/2/edit",
        data={"csrf_token": token.group(1), "into": "fixed", "body": "{not json"},
        headers=same_site,
    )
    assert bad_json.status_code == 400 and "the new body is not" in bad_json.text
    assert "fixed" not in [c["name"] for c in client.get("/cassettes.json").json()]
    edited = client.post(
        "/api/cassettes/bug-8821/2/edit",
        data={"csrf_token": token.group(1), "into": "fixed", "body": '{"order": "ord_1"}'},
        headers=same_site,
    )
    assert edited.status_code == 303 and edited.headers["location"] == "/cassettes/fixed/2"
    document = show_json(data_dir, "fixed", "2")
    assert isinstance(document, dict)
    assert document["response"]["body"]["text"] == '{"order": "ord_1"}'
    assert document["origin"]["kind"] == "edited"
    assert show_json(data_dir, "bug-8821", "2")["response"]["body"]["text"] == ANSWER  # type: ignore[index]
    shown = (client.get("/cassettes/fixed/2")).text
    assert 'id="edited"' in shown and "body replaced" in shown


def test_a_large_body_is_previewed_and_downloaded_whole(client: TestClient, data_dir: Path) -> None:
    big = b'{"data": "' + b"x" * (200 * 1024) + b'"}'
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        record(store, "big", 1, answer=big)
    page = (client.get("/cassettes/big/0")).text
    assert "only the start shown" in page and page.count("x") < 100 * 1024
    download = client.get("/cassettes/big/0/body/response")
    assert download.content == big


def test_a_long_run_opens_a_page_at_a_time_with_the_whole_runs_figures(
    client: TestClient, data_dir: Path
) -> None:
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        record(store, "long", PAGE_ROWS + 5)
    first = client.get("/cassettes/long").text
    assert first.count('class="exchange ') == PAGE_ROWS
    assert f"{PAGE_ROWS + 5} exchanges" in first and "page 1 of 2" in first
    second = client.get("/cassettes/long?page=2").text
    assert second.count('class="exchange ') == 5 and 'id="row-204"' in second
    assert len(client.get("/cassettes/long.json").json()) == PAGE_ROWS + 5
    by_host = client.get("/cassettes/bug-8821.json?host=api.openai.com").json()
    assert len(by_host) == 3
    assert client.get("/cassettes/bug-8821.json?host=elsewhere.example").json() == []
    truncated = client.get("/cassettes/rate.json?outcome=truncated").json()
    assert [row["outcome"] for row in truncated] == ["truncated"]
    assert client.get("/cassettes/rate?status=429&outcome=truncated").status_code == 400


def test_names_and_queries_from_the_url_are_shown_as_text(client: TestClient) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    for path in (f"/cassettes/{hostile}", f"/compare?a={hostile}&b=rate", f"/search?q={hostile}"):
        page = client.get(path)
        assert "<img src=x" not in page.text, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in page.text, path
    assert client.get(f"/cassettes/{hostile}").status_code == 400
    assert client.get(f"/cassettes/{hostile}.json").json()["error"].startswith("invalid")


def test_every_template_and_static_file_is_package_data() -> None:
    """A wheel (not only an editable install) must carry what the pages need."""
    root = Path(__file__).parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["freezeframe.proxy.admin"]
    admin = root / "proxy" / "admin"
    shipped = [
        path.relative_to(admin).as_posix()
        for folder in ("templates", "static")
        for path in (admin / folder).rglob("*")
        if path.is_file()
    ]
    assert "static/htmx-LICENSE.txt" in shipped and "templates/base.html" in shipped
    assert [f for f in shipped if not any(fnmatch(f, p) for p in patterns)] == []


def test_an_exchange_shows_its_websocket_transcript_drift_and_stripped_parts(
    client: TestClient, data_dir: Path
) -> None:
    transcript = (
        Message(from_client=True, text=True, at=0.01, data=b'{"type": "<b>hello</b>"}'),
        Message(from_client=False, text=False, at=0.02, data=b"\x00\xff"),
    )
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        record(store, "ws", 1, messages=transcript)
        store.note_drift("ws", 0, ["body:$.user"], {"run-id": "again"})
        store.flush()
    page = client.get("/cassettes/ws/0").text
    assert page.count('class="wsmsg"') == 2
    assert "&lt;b&gt;hello&lt;/b&gt;" in page and "AP8=" in page
    assert "body:$.user" in page and "run-id: again" in page
    assert client.get("/cassettes/ws/0.json").json()["drift"][0]["paths"] == ["body:$.user"]
    listing = client.get("/cassettes/ws").text
    assert "drift ×1" in listing and "ws 2 msgs" in listing


def submit_one(
    store: Store, cassette: str, at: float, url: str, request: bytes, answer: bytes
) -> None:
    """One exchange of an agent's run, keyed as the proxy keys it."""
    parts = httpx.URL(url)
    view = RequestView(
        method="POST" if request else "GET",
        scheme="https",
        host=parts.host,
        port=443,
        path=parts.path,
        query=tuple(parts.params.multi_items()),
        headers=(),
        body=request,
        content_type="application/json",
    )
    canonical = canonicalize(view, key_config())
    target = parts.raw_path.decode()
    store.submit(
        NewExchange(
            cassette=cassette,
            key=canonical.key,
            key_scheme=1,
            canonical=canonical.form,
            method=view.method,
            scheme="https",
            host=parts.host,
            port=443,
            path=target,
            http_version="HTTP/1.1",
            request_headers=((b"content-type", b"application/json"),),
            request_body=request,
            started_at=at,
            duration=0.1,
            response=RecordedResponse(
                status=200,
                reason="OK",
                http_version="HTTP/1.1",
                headers=((b"content-type", b"application/json"),),
                body=answer,
                chunks=(Chunk(0, 0.05),),
                first_byte_at=0.05,
            ),
            outcome=Outcome.COMPLETE,
            error=None,
            context={},
            slot=store.reserve(cassette, canonical.key),
        )
    )


def test_a_tool_asked_for_again_and_again_shows_as_a_loop(
    client: TestClient, data_dir: Path
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "weather in Paris?"}]
    at = 1_790_000_000.0
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        for n in range(4):
            function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
            call = {"id": f"c{n}", "type": "function", "function": function}
            asked = {"role": "assistant", "content": None, "tool_calls": [call]}
            answer = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": asked, "finish_reason": "tool_calls"}],
            }
            request = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
            url = "https://api.openai.com/v1/chat/completions"
            submit_one(store, "loop", at, url, request, json.dumps(answer).encode())
            submit_one(store, "loop", at + 0.5, "https://w.test/t?city=Paris", b"", b"{}")
            messages += [asked, {"role": "tool", "tool_call_id": f"c{n}", "content": "no data"}]
            at += 1
        store.flush()
    loops = client.get("/cassettes/loop/steps.json").json()["loops"]
    assert [(loop["tool"], loop["count"]) for loop in loops] == [("get_weather", 4)]
    page = client.get("/cassettes/loop/steps").text
    assert 'class="loop" data-tool="get_weather"' in page
    assert "called 4 times with identical arguments" in page


def test_a_binary_answer_is_shown_as_a_hex_dump(client: TestClient, data_dir: Path) -> None:
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        record(store, "binary", 1, answer=bytes(range(256)) * 64)
    page = client.get("/cassettes/binary/0").text
    assert 'class="body hex"' in page
    assert "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................" in page
    assert client.get("/cassettes/binary/0/body/response").content == bytes(range(256)) * 64
    listed = client.get("/cassettes", headers={"accept": "application/json"}).json()
    assert "binary" in [c["name"] for c in listed]


def test_a_json_path_gets_break_points_between_its_steps_and_its_keys_stay_text() -> None:
    jsonpath = templates().filters["jsonpath"]
    assert jsonpath("$.messages[3].content[0].text") == (
        "$.<wbr>messages<wbr>[3].<wbr>content<wbr>[0].<wbr>text"
    )
    hostile = jsonpath('$.tools["<img src=x onerror=alert(1)>"].name')
    assert "<img" not in hostile and "&lt;img src=x onerror=alert(1)&gt;" in hostile
    assert hostile.count("<wbr>") == 3
