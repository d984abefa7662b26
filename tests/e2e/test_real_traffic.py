"""Every reader over traffic as real agents send it (issue 22).

One proxy records the corpus of tests/support/corpus.py (openai, anthropic, the MCP SDK,
requests and httpx, against local servers) twice, into ``corpus`` and ``rerun``; the second
time the upstream mints other ids, as a live model does. Then the case file is crawled from
``/`` (every link, HTML and ``.json`` twin) and ``show``, ``diff``, ``search`` and every
export format read all of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
import trustme
from click.testing import CliRunner
from support.corpus import send_corpus
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
        Upstream(upstream_ca) as upstream,
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
            env.undo()
            counted = len(proxy.admin("GET", "/api/cassettes/rerun").json())
            proxy.stored("rerun", counted)
            yield Recorded(proxy, data_dir)
        finally:
            proxy.kill()


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
    for word in ("Paris", "Oslo", "lookup", "trace.span"):
        code, out = _cli(recorded.data_dir, "search", word, "--json")
        assert code == 0, out
        assert json.loads(out), word


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
