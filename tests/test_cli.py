"""The command line: what people read, what scripts parse, and how it fails."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner, Result
from support.exchanges import plausible_exchange
from support.proxy import free_port

from freezeframe import cli
from freezeframe.canonicalize import RequestView, canonicalize
from freezeframe.canonicalize.drift import digests
from freezeframe.commands.output import InertFormatter
from freezeframe.proxy.keys import key_config
from freezeframe.proxy.localcapture import local_capture_unavailable_reason
from freezeframe.storage import Chunk, NewExchange, Outcome, RecordedResponse, open_store

BODY = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "user": "u1"}'


def store_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'freezeframe.db'}"


def record(
    data_dir: Path,
    cassette: str,
    count: int,
    *,
    status: int = 200,
    answer: bytes | None = None,
    chunks: int = 1,
) -> None:
    """Write ``count`` exchanges the way the proxy does: key from canonicalize, then submit.

    Each answer is ``answer`` (a small JSON body of its own by default), in ``chunks``
    chunks 10 ms apart."""
    view = RequestView(
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        query=(),
        headers=(),
        body=BODY,
        content_type="application/json",
    )
    canonical = canonicalize(view, key_config())
    with open_store(store_url(data_dir)) as store:
        for n in range(count):
            body = answer or json.dumps({"id": f"chatcmpl-{n}", "n": n}).encode()
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
                    request_headers=(
                        (b"content-type", b"application/json"),
                        (b"authorization", b"Bearer [redacted:0123456789abcdef]"),
                    ),
                    request_body=BODY,
                    started_at=1_790_000_000.0 + n,
                    duration=0.25,
                    response=RecordedResponse(
                        status=status,
                        reason="OK",
                        http_version="HTTP/1.1",
                        headers=((b"content-type", b"application/json"),)
                        + (((b"retry-after", b"30"),) if status == 429 else ()),
                        body=body,
                        chunks=tuple(Chunk(i * 100, 0.2 + i / 100) for i in range(chunks)),
                        first_byte_at=0.2,
                    ),
                    outcome=Outcome.COMPLETE,
                    error=None,
                    context={"run-id": "run-7"},
                    slot=store.reserve(cassette, canonical.key),
                    stripped=digests(canonical.stripped),
                )
            )


def invoke(*args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli.main, list(args), input=input, catch_exceptions=False)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert result.stdout == ""
    message = result.stderr.strip()
    assert message.startswith("freezeframe: error: ") and "\n" not in message, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in message


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    record(path, "bug-8821", 3)
    record(path, "other", 1, status=429)
    return path


def test_ls_lists_cassettes_for_people_and_for_machines(data_dir: Path) -> None:
    listed = json.loads(invoke("ls", "--json", "--data-dir", str(data_dir)).stdout)
    assert [(c["name"], c["exchanges"]) for c in listed] == [("bug-8821", 3), ("other", 1)]
    assert all(c["stored_bytes"] > 0 and c["first_at"] <= c["last_at"] for c in listed)
    table = invoke("ls", "--data-dir", str(data_dir)).stdout
    assert "bug-8821" in table and "other" in table


def test_show_lists_a_cassette_in_recorded_order(data_dir: Path) -> None:
    rows = json.loads(invoke("show", "bug-8821", "--json", "--data-dir", str(data_dir)).stdout)
    assert [(r["seq"], r["occurrence"], r["status"]) for r in rows] == [
        (0, 0, 200),
        (1, 1, 200),
        (2, 2, 200),
    ]
    assert rows[0]["url"] == "https://api.openai.com/v1/chat/completions"
    table = invoke("show", "bug-8821", "--data-dir", str(data_dir)).stdout
    assert table.count("POST") == 3 and table.count("complete") == 3


def test_show_one_exchange_whole(data_dir: Path) -> None:
    document = json.loads(
        invoke("show", "bug-8821", "1", "--json", "--data-dir", str(data_dir)).stdout
    )
    assert document["request"]["method"] == "POST"
    assert document["request"]["body"]["text"] == BODY.decode()
    assert document["request"]["canonical"]["body"]["model"] == "gpt-4o-mini"
    assert document["response"]["body"]["text"] == '{"id": "chatcmpl-1", "n": 1}'
    assert document["timing"] == {
        "started_at": 1_790_000_001.0,
        "first_byte_after": 0.2,
        "duration": 0.25,
    }
    assert document["context"] == {"run-id": "run-7"}
    assert ["authorization", "Bearer [redacted:0123456789abcdef]"] in document["request"]["headers"]
    people = invoke("show", "bug-8821", "1", "--data-dir", str(data_dir)).stdout
    assert "chatcmpl-1" in people and "run-id: run-7" in people


def test_show_reads_an_exchange_whose_canonical_form_is_not_json(tmp_path: Path) -> None:
    """What tests/benchmarks/bench_scale.py writes: a synthetic form, not the proxy's JSON."""
    with open_store(store_url(tmp_path)) as store:
        slot = store.reserve("scale", "f" * 64)
        store.submit(plausible_exchange(slot, cassette="scale", key="f" * 64))
    people = invoke("show", "scale", "0", "--data-dir", str(tmp_path))
    assert people.exit_code == 0, people.stderr
    assert f"== canonical form (what the key is computed from)\nPOST /v1/chat {'f' * 64}\n" in (
        people.stdout
    )
    document = json.loads(
        invoke("show", "scale", "0", "--json", "--data-dir", str(tmp_path)).stdout
    )
    assert document["request"]["canonical"] == f"POST /v1/chat {'f' * 64}"


def test_show_of_what_is_not_there_is_one_line(data_dir: Path) -> None:
    assert_one_line_error(
        invoke("show", "nope", "--data-dir", str(data_dir)), "no cassette named 'nope'"
    )
    assert_one_line_error(
        invoke("show", "bug-8821", "9", "--data-dir", str(data_dir)), "has no exchange 9"
    )
    assert_one_line_error(invoke("show", "../x", "--data-dir", str(data_dir)), "invalid cassette")


def test_verify_passes_then_catches_tampering(data_dir: Path) -> None:
    assert invoke("verify", "bug-8821", "--data-dir", str(data_dir)).exit_code == 0
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(data_dir / "freezeframe.db")) as db, db:
        db.execute("UPDATE exchanges SET status = 200 WHERE status = 429")
    broken = invoke("verify", "other", "--json", "--data-dir", str(data_dir))
    assert broken.exit_code == 1
    assert json.loads(broken.stdout)["ok"] is False


def test_ca_prints_the_cert_and_a_bundle_with_the_system_cas(tmp_path: Path) -> None:
    from freezeframe.proxy.trust import ensure_ca

    ensure_ca(tmp_path)  # a proxy's first start does this
    path = Path(invoke("ca", "--data-dir", str(tmp_path)).stdout.strip())
    assert path == (tmp_path / "mitmproxy-ca-cert.pem").absolute()
    ca = path.read_bytes()
    assert ca.startswith(b"-----BEGIN CERTIFICATE-----")
    bundle = Path(invoke("ca", "--bundle", "--data-dir", str(tmp_path)).stdout.strip()).read_bytes()
    assert ca in bundle
    assert bundle.count(b"BEGIN CERTIFICATE") > 10, "the system's CAs are missing"


def test_ca_never_creates_a_ca(tmp_path: Path) -> None:
    result = invoke("ca", "--data-dir", str(tmp_path / "typo"))
    assert_one_line_error(result, "no CA at", "typo")
    assert not (tmp_path / "typo").exists()


def test_explain_shows_key_form_and_what_was_stripped(tmp_path: Path) -> None:
    args = [
        "explain",
        "--method",
        "post",
        "--url",
        "https://API.openai.com/v1/chat/completions",
        "--header",
        "Content-Type: application/json",
        "--header",
        "Authorization: Bearer sk-live-0123456789abcdefghijklmn",
        "--body",
        "-",
        "--json",
        "--data-dir",
        str(tmp_path),
    ]
    document = json.loads(invoke(*args, input=BODY).stdout)
    assert document["canonical"]["host"] == "api.openai.com"
    assert document["canonical"]["body"] == {
        "messages": [{"content": "hi", "role": "user"}],
        "model": "gpt-4o-mini",
    }
    assert [(s["part"], s["rule"]) for s in document["stripped"]] == [
        ("body:$.user", "openai.chat-completions")
    ]
    reordered = BODY.replace(b'"user": "u1"', b'"user": "someone else"')
    assert json.loads(invoke(*args, input=reordered).stdout)["key"] == document["key"]
    text = invoke(*args[:-3], "--data-dir", str(tmp_path), input=BODY).stdout
    assert document["key"] in text and "body:$.user" in text
    assert "sk-live" not in text


def test_explain_rejects_a_bad_url_in_one_line(tmp_path: Path) -> None:
    result = invoke("explain", "--method", "GET", "--url", "ftp://x", "--data-dir", str(tmp_path))
    assert_one_line_error(result, "--url", "absolute http(s) URL")


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--cassette", "a/b"], {}, "invalid cassette name"),
        (["--listen", "localhost:http"], {}, "listen address"),
        (["--store", "postgresql://u:pw@127.0.0.1:1/x"], {}, "cannot open store"),
        (["--upstream-ca", "/nonexistent/ca.pem"], {}, "upstream CA"),
        (["--upstream-ca", __file__], {}, "not PEM certificates"),
        (["--mode", "replay", "--fresh"], {}, "--fresh empties the cassette"),
        ([], {"FREEZEFRAME_FRESH": "1", "FREEZEFRAME_MODE": "passthrough"}, "passthrough mode"),
        (["--admin", "0.0.0.0:0"], {}, "reachable from other machines: set --admin-token"),
        (["--admin", "10.1.2.3:0"], {}, "(FREEZEFRAME_ADMIN_TOKEN)"),
        ([], {"FREEZEFRAME_ADMIN_TOKEN": "pw"}, "at least 16"),
        (["--admin-host", "evil/x"], {}, "--admin-host 'evil/x'"),
    ],
)
def test_run_refuses_bad_settings_in_one_line_and_damages_nothing(
    data_dir: Path, args: list[str], env: dict[str, str], fragment: str
) -> None:
    # A process of its own, with free ports: a setting that is wrongly let through starts
    # a proxy, which must not take this test run down with it.
    ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
    result = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "freezeframe",
            "run",
            "--data-dir",
            str(data_dir),
            *ports,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}, **env},
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("freezeframe: error: ") and result.stderr.count("\n") == 1
    assert fragment in result.stderr
    assert "pw" not in result.stderr
    assert invoke("verify", "bug-8821", "--data-dir", str(data_dir)).exit_code == 0


def writer_children() -> list[int]:
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):  # gone, or a zombie: its cmdline is unreadable
            if "writerchild" in " ".join(child.cmdline()):
                found.append(child.pid)
    return found


def test_run_refuses_an_unwritable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = invoke("run", "--data-dir", str(blocker / "data"))
    assert_one_line_error(result, "data dir", "is not writable")
    # The writer process started before the proxy's imports is ended (and reaped) with the
    # failed start; other tests' children, zombies included, are none of this test's business.
    assert writer_children() == []


def test_run_names_every_port_in_use_in_one_line(data_dir: Path) -> None:
    with socket.socket() as proxy_port, socket.socket() as admin_port:
        for taken in (proxy_port, admin_port):
            taken.bind(("127.0.0.1", 0))
            taken.listen()
        busy = [taken.getsockname()[1] for taken in (proxy_port, admin_port)]
        result = subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "freezeframe",
                "run",
                "--data-dir",
                str(data_dir),
                "--listen",
                f"127.0.0.1:{busy[0]}",
                "--admin",
                f"127.0.0.1:{busy[1]}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert result.stderr == (
        f"freezeframe: error: address in use: 127.0.0.1:{busy[0]} (--listen); "
        f"127.0.0.1:{busy[1]} (--admin); choose other ports\n"
    )


def test_show_names_the_rewrites_replay_would_make(data_dir: Path) -> None:
    document = json.loads(
        invoke("show", "other", "0", "--json", "--data-dir", str(data_dir)).stdout
    )
    assert document["rewrites"] == [
        {"header": "retry-after", "recorded": "30", "replayed": "0", "when": "replay pace instant"}
    ]
    people = invoke("show", "other", "0", "--data-dir", str(data_dir)).stdout
    assert "rewritten on replay (replay pace instant): retry-after: 30 -> 0" in people
    untouched = invoke("show", "bug-8821", "0", "--json", "--data-dir", str(data_dir)).stdout
    assert json.loads(untouched)["rewrites"] == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["show", "bug-8821", "abc"], "'abc' is not a valid integer"),
        (
            ["explain", "--method", "GET", "--url", "https://x/", "--body", "/nope.json"],
            "/nope.json",
        ),
        (["ls", "--bogus"], "No such option '--bogus'"),
        (["rm"], "Missing argument 'CASSETTE'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(
    data_dir: Path, args: list[str], fragment: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("freezeframe: error: ") and result.stderr.count("\n") == 1
    assert fragment in result.stderr and "--help)" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["ls"], ["show", "bug-8821"], ["show", "bug-8821", "0"], ["verify", "bug-8821"],
     ["rekey", "bug-8821"], ["rm", "bug-8821", "--yes"]],
    ids=lambda args: " ".join(args),
)  # fmt: skip
def test_read_commands_on_a_missing_store_say_so_and_create_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo"
    result = invoke(*args, "--data-dir", str(missing))
    assert result.exit_code == 1
    assert_one_line_error(
        result, f"no store at {missing / 'freezeframe.db'}", "pass --data-dir or --store"
    )
    assert not missing.exists()


def test_show_one_exchange_prints_every_section_and_cuts_long_bodies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    long_body = json.dumps({"items": [{"n": n, "text": "x" * 300} for n in range(120)]})
    record(data, "long", 1, answer=long_body.encode(), chunks=15)
    text = invoke("show", "long", "0", "--data-dir", str(data)).stdout
    for section in (
        "== #0 POST https://api.openai.com/v1/chat/completions",
        "== request",
        "== canonical form",
        "== response  200 OK",
        "== replay",
        "stripped     (left out of the key",
        "body:$.user",
        "chunks       15 arrived between 200 ms and 340 ms",
        "… 5 more; --full shows them all",
        "chain        ",
        "timing       started 2026-",
    ):
        assert section in text, section
    assert '"model": "gpt-4o-mini"' in text, "the canonical form is printed"
    assert "more lines" in text and "--full shows everything" in text
    assert len(text) < 12_000
    full = invoke("show", "long", "0", "--full", "--data-dir", str(data)).stdout
    assert "more lines" not in full and full.count('"text": "xxx') == 120
    assert "… 5 more" not in full


def test_piped_output_never_wraps_a_key_or_a_json_value(tmp_path: Path) -> None:
    data = tmp_path / "data"
    record(data, "wide", 1)
    text = invoke("show", "wide", "0", "--data-dir", str(data)).stdout
    document = json.loads(invoke("show", "wide", "0", "--json", "--data-dir", str(data)).stdout)
    assert f"key          {document['key']} (scheme" in text
    assert f"chain        {document['chain']}" in text
    long_prompt = "p" * 500
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": long_prompt}]})
    explained = invoke(
        "explain", "--method", "POST", "--url", "https://api.openai.com/v1/chat/completions",
        "--header", "Content-Type: application/json", "--body", "-", "--data-dir", str(data),
        input=body.encode(),
    ).stdout  # fmt: skip
    assert f'"content": "{long_prompt}"' in explained
    key = json.loads(
        invoke(
            "explain", "--method", "POST", "--url", "https://api.openai.com/v1/chat/completions",
            "--header", "Content-Type: application/json", "--body", "-", "--json",
            "--data-dir", str(data), input=body.encode(),
        ).stdout
    )["key"]  # fmt: skip
    assert re.search(rf"^key {key}  \(profile openai\.chat-completions\)$", explained, re.M)


def test_rm_removes_a_cassette_and_keeps_what_others_use(data_dir: Path) -> None:
    before = {
        c["name"]: c for c in json.loads(invoke("ls", "--json", "--data-dir", str(data_dir)).stdout)
    }
    refused = invoke("rm", "bug-8821", "--data-dir", str(data_dir))
    assert_one_line_error(refused, "pass --yes")
    removed = json.loads(
        invoke("rm", "bug-8821", "--yes", "--json", "--data-dir", str(data_dir)).stdout
    )
    # chatcmpl-1 and -2; the request, its canonical form and chatcmpl-0 are in "other" too
    assert removed["exchanges"] == 3 and removed["bodies"] == 2 and removed["freed"] > 0
    after = json.loads(invoke("ls", "--json", "--data-dir", str(data_dir)).stdout)
    assert [c["name"] for c in after] == ["other"]
    assert after[0]["stored_bytes"] == before["other"]["stored_bytes"]
    assert invoke("verify", "other", "--data-dir", str(data_dir)).exit_code == 0
    assert_one_line_error(
        invoke("rm", "bug-8821", "--yes", "--data-dir", str(data_dir)), "no cassette named"
    )


EXEC_REFUSALS = [
    (["--capture", "transparent", "--no-isolate"], "drop --no-isolate"),
    (["--capture", "transparent", "--proxy", "http://127.0.0.1:9"], "not --proxy"),
    (["--capture", "transparent", "--upstream-proxy", "http://127.0.0.1:9"], "--upstream-proxy"),
    (["--capture", "local", "--isolate"], "cannot be combined"),
]
if _local_reason := local_capture_unavailable_reason():
    EXEC_REFUSALS.append(
        (["--capture", "local"], f"--capture local does not run here: {_local_reason}")
    )


@pytest.mark.parametrize(
    ("args", "fragment"), EXEC_REFUSALS, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_exec_refuses_capture_and_isolation_that_cannot_work_in_one_line(
    data_dir: Path, args: list[str], fragment: str
) -> None:
    result = invoke("exec", "--data-dir", str(data_dir), *args, "--", "true")
    assert_one_line_error(result, fragment)


def test_gc_says_what_it_would_free_then_frees_it(data_dir: Path) -> None:
    from support.database import run_sql

    from freezeframe.storage.blobs import compress, digest

    left = b"a body a failed import left behind"
    run_sql(
        store_url(data_dir),
        "INSERT INTO blobs (digest, size, stored_size, data, parts, stored_at) "
        "VALUES (:d, :s, :ss, :data, 0, 0)",
        d=digest(left), s=len(left), ss=len(compress(left)), data=compress(left),
    )  # fmt: skip
    dry = invoke("gc", "--dry-run", "--data-dir", str(data_dir)).stdout
    assert dry.startswith("would remove 1 bodies no cassette uses")
    done = json.loads(invoke("gc", "--json", "--data-dir", str(data_dir)).stdout)
    assert (done["bodies"], done["dry_run"]) == (1, False)
    assert json.loads(invoke("gc", "--json", "--data-dir", str(data_dir)).stdout)["bodies"] == 0
    assert invoke("verify", "bug-8821", "--data-dir", str(data_dir)).exit_code == 0
    assert_one_line_error(
        invoke("gc", "--grace", "soon", "--data-dir", str(data_dir)), "--grace 'soon'"
    )


def test_blobs_move_there_and_back_and_every_command_reads_them(
    data_dir: Path, blobs_url: str
) -> None:
    shown = invoke("show", "bug-8821", "1", "--json", "--data-dir", str(data_dir)).stdout
    moved = invoke("blobs", "move", "--to", blobs_url, "--data-dir", str(data_dir))
    assert moved.stdout.startswith("moved ") and f"into {blobs_url}" in moved.stdout
    there = ("--data-dir", str(data_dir), "--blobs", blobs_url)
    assert invoke("show", "bug-8821", "1", "--json", *there).stdout == shown
    assert invoke("verify", "bug-8821", *there).exit_code == 0
    assert_one_line_error(
        invoke("show", "bug-8821", "1", "--json", "--data-dir", str(data_dir)),
        "kept in object storage",
        "--blobs URL",
    )
    collected = json.loads(invoke("gc", "--json", "--grace", "1s", *there).stdout)
    assert collected["objects"] == 0, "every object is named"
    back = invoke("blobs", "move", "--to", "sql", *there)
    assert back.stdout.startswith("moved ") and "into the SQL store" in back.stdout
    assert invoke("show", "bug-8821", "1", "--json", "--data-dir", str(data_dir)).stdout == shown
    assert invoke("verify", "bug-8821", "--data-dir", str(data_dir)).exit_code == 0
    assert_one_line_error(
        invoke("blobs", "move", "--to", "sql", "--data-dir", str(data_dir)), "--blobs URL"
    )
    assert_one_line_error(
        invoke("blobs", "move", "--to", "ftp://x", "--data-dir", str(data_dir)),
        "expected s3://BUCKET[/PREFIX]",
    )


def test_max_age_removes_cassettes_nobody_recorded_into_for_that_long(data_dir: Path) -> None:
    from freezeframe.proxy.retention import sweep

    with open_store(store_url(data_dir)) as store:
        removed = sweep(store, max_age=30 * 86400, now=1_790_000_000.0 + 31 * 86400)
        assert [r.cassette for r in removed] == ["bug-8821", "other"]
        assert store.cassette_names() == []
    record(data_dir, "fresh", 1)
    with open_store(store_url(data_dir)) as store:
        assert sweep(store, max_age=30 * 86400, now=1_790_000_000.0 + 86400) == []


def test_recorded_escape_sequences_never_reach_the_terminal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
    record(data, "odd", 1, answer=f"plain text {hostile}".encode())
    outputs = [
        invoke("show", "odd", "0", "--data-dir", str(data)).stdout,
        invoke("show", "odd", "0", "--full", "--data-dir", str(data)).stdout,
        invoke("search", "pwned", "--data-dir", str(data)).stdout,
    ]
    for output in outputs:
        assert not any(c in output for c in "\x1b\x07\x9b"), repr(output)
    assert "\\x1b]0;pwned\\x07" in outputs[0]
    assert "pwned" in outputs[2], "the search found it, and printed it inert"


def test_log_lines_are_inert() -> None:
    import logging

    formatter = InertFormatter("%(message)s")
    line = formatter.format(
        logging.LogRecord("x", logging.INFO, "f", 1, "recorded %s", ("\x1b]52;c;Zm9v\x07",), None)
    )
    assert line == "recorded \\x1b]52;c;Zm9v\\x07"
