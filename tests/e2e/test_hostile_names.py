"""Hostile names and header values (issue 16): refused where they name a cassette, inert
wherever they are shown.

Each value of HOSTILE goes through the real proxy with a real client, as a cassette name at
every entry point (the header, the CLI, the admin API, the case file) and as a run id, the
other ``X-Freezeframe-*`` context headers, an ordinary header and a body. Then the proxy is
still up, what the CLI prints (``ls``, ``show``, ``show SEQ``, ``search`` run as
subprocesses; ``show SEQ`` of every exchange, ``search`` and ``diff`` of every value
in-process, the same rendering without a process start each), the log and the case-file
pages hold no byte that commands a terminal and no HTML that a browser would run, no file
appeared outside the data dir, and the store (SQLite, and PostgreSQL when it answers) holds
every value as sent and verifies.

Control characters and NUL cannot be sent through httpx's header validation, so the values
travel in raw HTTP/1.1 written to a TLS socket through the proxy's CONNECT tunnel, as a
hostile client would write them.
"""

from __future__ import annotations

import html
import json
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import trustme
from click.testing import CliRunner
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe.cli import main

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
CASSETTE = "hostile"
HOSTILE = {
    "traversal": "../../etc/passwd",
    "encoded-traversal": "..%2f..%2fetc%2fpasswd",
    "sql": "'; DROP TABLE exchanges; --",
    "osc52-clipboard": "\x1b]52;c;aGFja2Vk\x07",
    "clear-screen": "\x1b[2J\x1b[H",
    "html": "<img src=x onerror=alert(1)>",
    "nul": "run\x00id",
    "very-long": "A" * 10_000,
}
CONTEXT = ("Run-Id", "Session-Id", "User-Id", "Tenant-Id", "Commit", "Flags")
COMMANDING = ("\x1b", "\x07", "\x00", "\x9b")
"""ESC, BEL, NUL and the C1 control sequence introducer: none may reach a terminal raw."""
UNSAFE_HTML = "<img src=x onerror"


@pytest.fixture(scope="module")
def upstream(upstream_ca: trustme.CA) -> Iterator[Upstream]:
    with Upstream(upstream_ca) as up:
        yield up


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory everything of this module lives in; nothing may appear outside it but
    the data dir and the proxy's log."""
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def proxy(world: Path, upstream_ca_file: Path) -> Iterator[ProxyProcess]:
    """One recording proxy for the module's tests, which share its store."""
    running = ProxyProcess(world / "data", cassette=CASSETTE, upstream_ca=upstream_ca_file)
    running.start()
    try:
        yield running
    finally:
        running.kill()


@pytest.fixture(scope="module")
def recorded(proxy: ProxyProcess, upstream: Upstream, world: Path) -> dict[str, int]:
    """The hostile exchanges, and misses in replay: the values in the URL the miss names and
    in its run id."""
    before = files_outside(world)
    seqs = record_hostile(proxy, upstream)
    assert proxy.admin("PUT", "/api/mode", json={"mode": "replay"}).status_code == 200
    for value in (HOSTILE["html"], HOSTILE["clear-screen"], HOSTILE["sql"]):
        target = "/tool/counter?q=" + value.replace(" ", "%20")
        headers = [("X-Freezeframe-Run-Id", value)]
        status, _ = raw_request(proxy, upstream, "GET", target, headers)
        assert status in (400, 404), "a miss (or a target the proxy refuses)"
    assert proxy.admin("PUT", "/api/mode", json={"mode": "record"}).status_code == 200
    assert len(proxy.admin("GET", f"/api/cassettes/{CASSETTE}/misses").json()) == 3
    assert files_outside(world) == before
    return seqs


def record_hostile(proxy: ProxyProcess, upstream: Upstream) -> dict[str, int]:
    """One exchange per hostile value (seq by value), carried in every context header, an
    ordinary header, the User-Agent and the body."""
    seqs = {}
    for seq, (name, value) in enumerate(HOSTILE.items()):
        headers = [(f"X-Freezeframe-{field}", value) for field in CONTEXT]
        headers += [("X-Note", value), ("User-Agent", value), ("Content-Type", "application/json")]
        body = json.dumps({"marker": "hostile-marker", "value": value}).encode()
        status, _ = raw_request(proxy, upstream, "POST", "/tool/counter", headers, body)
        # forwarded as sent: the upstream's own parser refuses a NUL in a header with a 400
        assert status == (400 if "\x00" in value else 200), name
        seqs[name] = seq
    return seqs


def stored_as_sent(proxy: ProxyProcess, seqs: dict[str, int]) -> None:
    rows = proxy.stored(CASSETTE, len(seqs))
    assert [row["seq"] for row in rows] == list(seqs.values()), "the SQL dropped nothing"
    for name, seq in seqs.items():
        context = rows[seq]["context"]
        assert context["run-id"] == context["flags"] == HOSTILE[name], name


def raw_request(
    proxy: ProxyProcess,
    upstream: Upstream,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
) -> tuple[int, bytes]:
    """HTTP/1.1 written byte for byte through the proxy's CONNECT tunnel: (status, body)."""
    authority = upstream.base_url.removeprefix("https://")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as raw:
        raw.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        assert b" 200 " in raw.recv(4096).split(b"\r\n", 1)[0]
        context = ssl.create_default_context(cafile=str(proxy.ca_path))
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}", "Connection: close"]
            lines += [f"{name}: {value}" for name, value in headers]
            lines.append(f"Content-Length: {len(body)}")
            tls.sendall("\r\n".join(lines).encode("utf-8") + b"\r\n\r\n" + body)
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


def files_outside(world: Path) -> set[Path]:
    """Every file under the module's directory and at the top of the repository (the
    proxy's working directory), but the data dir's and the logs."""
    data = world / "data"
    found = {p for p in world.rglob("*") if data not in p.parents and p.suffix != ".log"}
    return found | set(REPO.iterdir())


def freezeframe(proxy: ProxyProcess, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(proxy.data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def inert(text: str, where: str) -> None:
    """No byte of ``text`` commands a terminal."""
    for byte in COMMANDING:
        assert byte not in text, f"{where} holds a raw {byte!r}"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_cassette_header_is_refused_and_the_proxy_stays_up(
    name: str, proxy: ProxyProcess, upstream: Upstream, world: Path
) -> None:
    before = files_outside(world)
    headers = [("X-Freezeframe-Cassette", HOSTILE[name])]
    status, body = raw_request(proxy, upstream, "GET", "/tool/counter", headers)
    assert status == 400
    inert(body.decode("utf-8", "replace"), "the refusal")
    assert proxy.admin("GET", "/health").status_code == 200
    assert files_outside(world) == before


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_cassette_name_is_refused_by_every_command(
    name: str, proxy: ProxyProcess, world: Path
) -> None:
    value = HOSTILE[name]
    before = files_outside(world)
    data = ["--data-dir", str(proxy.data_dir)]
    commands = [
        ["show", value],
        ["show", value, "0"],
        ["show", value, "--misses"],
        ["verify", value],
        ["rekey", value],
        ["search", "x", "--cassette", value],
        ["fork", CASSETTE, value],
        ["fork", value, "fine"],
        ["edit", CASSETTE, "0", "--into", value, "--status", "500"],
        ["resend", CASSETTE, "0", "--into", value],
        ["diff", value, CASSETTE],
        ["rm", value, "--yes"],
        ["run", "--cassette", value],
        ["run", "--mode", "replay", "--record-into", value],
        ["exec", "--cassette", value, "--", "true"],
    ]
    invocations = [(command, {}) for command in commands]
    if "\x00" not in value:  # no environment can hold a NUL
        invocations += [(["run"], {"FREEZEFRAME_CASSETTE": value})]
        invocations += [(["run"], {"FREEZEFRAME_MODE": "replay", "FREEZEFRAME_RECORD_INTO": value})]
    for command, env in invocations:
        done = CliRunner().invoke(main, [*command, *data], env=env)
        assert done.exit_code == 1, f"{command[0]} {env} accepted {name}: {done.output}"
        line = done.output.strip()
        assert "invalid cassette name" in line and "\n" not in line, command[0]
        inert(line, f"{command[0]}'s refusal")
    assert files_outside(world) == before


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_cassette_name_is_refused_by_the_admin_api_and_the_case_file(
    name: str, proxy: ProxyProcess, recorded: dict[str, int], world: Path
) -> None:
    value = HOSTILE[name]
    before = files_outside(world)
    path = quote(value, safe="")
    asked = [
        proxy.admin("GET", f"/api/cassettes/{path}"),
        proxy.admin("GET", f"/api/cassettes/{path}/0"),
        proxy.admin("PUT", "/api/mode", json={"mode": "record", "cassette": value}),
        proxy.admin("POST", f"/api/cassettes/{CASSETTE}/fork", json={"into": value}),
        proxy.admin("POST", f"/api/cassettes/{path}/fork", json={"into": "fine"}),
        proxy.admin(
            "POST", f"/api/cassettes/{CASSETTE}/0/edit", json={"into": value, "status": 500}
        ),
        proxy.admin("GET", f"/api/cassettes/{path}/misses"),
        proxy.admin("GET", "/api/search", params={"q": "hostile", "cassette": value}),
        proxy.admin("GET", "/search", params={"q": "hostile", "cassette": value}),
        proxy.admin("GET", f"/cassettes/{path}"),
        proxy.admin("GET", f"/cassettes/{path}/steps"),
        proxy.admin("GET", f"/compare?a={path}&b={CASSETTE}"),
    ]
    for answer in asked:
        where = f"{answer.request.method} {answer.request.url.path}"
        assert answer.status_code in (400, 404), f"{where} answered {answer.status_code}"
        inert(answer.text, where)
        kind = answer.headers["content-type"]
        assert answer.headers["x-content-type-options"] == "nosniff", where
        if kind.startswith("text/html"):
            assert UNSAFE_HTML not in answer.text, f"{where} echoes the HTML"
        else:  # data, never rendered: JSON or plain text that no browser sniffs as HTML
            assert kind.startswith(("application/json", "text/plain")), where
    mode = proxy.admin("GET", "/api/mode").json()
    assert mode["cassette"] == CASSETTE, "the default cassette was not switched"
    assert proxy.admin("GET", "/health").status_code == 200
    assert files_outside(world) == before


def test_hostile_run_ids_and_header_values_are_inert_in_the_cli_and_the_log(
    proxy: ProxyProcess, recorded: dict[str, int]
) -> None:
    """The commands as a user runs them, their bytes as a terminal gets them; ``show SEQ``
    of every exchange in-process too (the same rendering, without a process start each)."""
    osc52 = str(recorded["osc52-clipboard"])
    runs = [freezeframe(proxy, "ls"), freezeframe(proxy, "show", CASSETTE)]
    runs += [freezeframe(proxy, "show", CASSETTE, osc52), freezeframe(proxy, "search", "hostile")]
    printed = ""
    for run in runs:
        out, err = run.communicate(timeout=120)
        where = " ".join(str(arg) for arg in run.args[3:6])  # type: ignore[index]
        assert run.returncode == 0, f"{where}: {err.decode()}"
        printed += out.decode("utf-8") + err.decode("utf-8")
        inert(printed, where)
    data = ["--data-dir", str(proxy.data_dir)]
    shows = [["show", CASSETTE, str(seq)] for seq in recorded.values()]
    shows += [["search", value, "--cassette", CASSETTE] for value in HOSTILE.values()]
    shows += [["diff", f"{CASSETTE}@{value}", CASSETTE] for value in HOSTILE.values()]
    shows += [["diff", CASSETTE, f"{CASSETTE}@no run {value}"] for value in HOSTILE.values()]
    for command in [*shows, ["show", CASSETTE, "--misses"]]:
        name = " ".join(command)
        done = CliRunner().invoke(main, [*command, *data])
        assert done.exit_code in (0, 1), f"{name}: {done.output}"
        assert "cannot read store" not in done.output, f"{name}: {done.output}"
        inert(done.output, f"{name}")
        printed += done.output
    assert UNSAFE_HTML in printed and "DROP TABLE" in printed, "shown as text, not dropped"
    assert "\\x1b]52;c;aGFja2Vk\\x07" in printed, "the escape sequence shown, escaped"
    inert(proxy.log, "the proxy's log")
    assert "Traceback" not in proxy.log
    verified = CliRunner().invoke(main, ["verify", CASSETTE, *data])
    assert verified.exit_code == 0, verified.output


def test_hostile_run_ids_and_header_values_are_shown_escaped_in_the_case_file(
    proxy: ProxyProcess, recorded: dict[str, int]
) -> None:
    pages = ["/cassettes", f"/cassettes/{CASSETTE}", f"/cassettes/{CASSETTE}/steps"]
    pages += ["/search?q=hostile-marker", f"/cassettes/{CASSETTE}/misses"]
    pages += [f"/cassettes/{CASSETTE}/{seq}" for seq in recorded.values()]
    shown = ""
    for page in pages:
        answer = proxy.admin("GET", page)
        assert answer.status_code == 200, page
        assert answer.headers["content-type"].startswith("text/html"), page
        inert(answer.text, page)
        assert UNSAFE_HTML not in answer.text, f"{page} holds the HTML unescaped"
        shown += answer.text
    assert html.escape(HOSTILE["html"], quote=False) in shown, "shown, escaped"
    assert "\\x1b]52;c;aGFja2Vk\\x07" in shown, "the escape sequence shown, escaped"
    for value in HOSTILE.values():  # a run compared by its id, found or not
        for run in (value, f"no run {value}"):
            answer = proxy.admin(
                "GET", "/compare", params={"a": f"{CASSETTE}@{run}", "b": CASSETTE}
            )
            assert answer.status_code in (200, 400, 404), answer.status_code
            inert(answer.text, "/compare")
            assert UNSAFE_HTML not in answer.text, "/compare holds the HTML unescaped"


def test_the_store_holds_every_hostile_value_as_sent(
    proxy: ProxyProcess, recorded: dict[str, int]
) -> None:
    stored_as_sent(proxy, recorded)
    assert proxy.admin("GET", "/health").json()["status"] == "ok"


def test_a_postgresql_store_holds_them_as_sent_and_shows_them_inert(
    postgres_url: str, upstream: Upstream, world: Path, upstream_ca_file: Path
) -> None:
    data = world / "pg-data"
    proxy = ProxyProcess(data, cassette=CASSETTE, upstream_ca=upstream_ca_file, store=postgres_url)
    try:
        proxy.start()
        seqs = record_hostile(proxy, upstream)
        stored_as_sent(proxy, seqs)
        for seq in seqs.values():
            page = proxy.admin("GET", f"/cassettes/{CASSETTE}/{seq}").text
            inert(page, f"the PostgreSQL exchange page #{seq}")
            assert UNSAFE_HTML not in page
    finally:
        proxy.kill()
    done = CliRunner().invoke(
        main, ["verify", CASSETTE, "--store", postgres_url, "--data-dir", str(data)]
    )
    assert done.exit_code == 0, done.output
    inert(proxy.log, "the proxy's log")
