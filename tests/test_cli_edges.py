"""The rough edges a newcomer hit on the command line, each as they met it (issue #21)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.proxy import ProxyProcess
from test_cli import assert_one_line_error, invoke, record

from freezeframe import cli


def freezeframe(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command as a shell runs it, with no FREEZEFRAME_* variable but those given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**clean, **(env or {})},
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    record(path, "orders", 3)
    record(path, "other", 1, status=429)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["show", "orderz"],
        ["show", "orderz", "0"],
        ["verify", "orderz"],
        ["export", "orderz", "-o", "x.jsonl"],
        ["diff", "orderz", "other"],
        ["fork", "orderz", "copy"],
        ["rm", "orderz", "--yes"],
    ],
    ids=" ".join,
)
def test_a_mistyped_cassette_gets_the_nearest_names(data_dir: Path, args: list[str]) -> None:
    result = invoke(*args, "--data-dir", str(data_dir))
    assert result.exit_code == 1
    assert_one_line_error(result, "no cassette named 'orderz'", "did you mean 'orders'?")


def test_a_name_like_none_of_them_gets_no_guess(data_dir: Path) -> None:
    result = invoke("show", "zzzzzz", "--data-dir", str(data_dir))
    assert_one_line_error(result, "no cassette named 'zzzzzz'")
    assert "did you mean" not in result.stderr


def test_show_into_head_ends_quietly(data_dir: Path, tmp_path: Path) -> None:
    answer = json.dumps({"lines": [f"line {n} " + "x" * 60 for n in range(5000)]}, indent=1)
    record(data_dir, "long", 1, answer=answer.encode())
    shown = subprocess.Popen(
        [sys.executable, "-P", "-m", "freezeframe", "show", "long", "0", "--full"]
        + ["--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert shown.stdout is not None and shown.stderr is not None
    first = shown.stdout.readline()  # `| head -1`: one line, then the reader is gone
    shown.stdout.close()
    status = shown.wait(timeout=60)
    error = shown.stderr.read().decode()
    shown.stderr.close()
    assert first.startswith(b"== #0 POST https://api.openai.com")
    assert error == "", error  # was: freezeframe: error: [Errno 32] Broken pipe
    assert status == 1


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["run", "--mode", "replya"], {}),
        (["run"], {"FREEZEFRAME_MODE": "rewind"}),
        (["exec", "--mode", "replya", "--", "true"], {}),
        (["run", "--mdoe", "replay"], {}),
    ],
    ids=["run --mode replya", "FREEZEFRAME_MODE=rewind", "exec --mode replya", "run --mdoe"],
)
def test_a_misspelt_mode_is_a_usage_error_like_a_misspelt_flag(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    done = freezeframe(*args, "--data-dir", str(tmp_path / "data"), cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("freezeframe: error: ") and done.stderr.count("\n") == 1
    assert "--help)" in done.stderr
    if "--mdoe" not in args:
        assert "unknown mode" in done.stderr and "record, replay, auto, passthrough" in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["ls", "--status", "teapot"], "--status 'teapot'"),
        (["show", "orders", "1", "--model", "gpt-4o"], "drop them with SEQ"),
        (["show", "orders", "1", "--misses"], "drop SEQ and the filters"),
        (["edit", "orders", "0", "--into", "x", "--set", "$.n"], "expected JSONPATH=JSON"),
        (["edit", "orders", "0", "--into", "x", "--header", "nocolon"], "expected 'Name: value'"),
        (["resend", "orders", "0", "--into", "x", "--set", "$.n=nope"], "a string needs quotes"),
        (["explain", "--method", "GET", "--url", "ftp://x"], "absolute http(s) URL"),
        (["gc", "--grace", "soon"], "--grace 'soon'"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_arguments_click_cannot_check_are_usage_errors_too(
    data_dir: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    done = freezeframe(*args, "--data-dir", str(data_dir), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("freezeframe: error: ") and done.stderr.count("\n") == 1
    assert fragment in done.stderr and f"(see freezeframe {args[0]} --help)" in done.stderr
    assert invoke("ls", "--json", "--data-dir", str(data_dir)).stdout.count('"name"') == 2


def test_a_variable_of_several_values_splits_on_its_separator_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pattern may hold spaces and commas, so FREEZEFRAME_REDACT_PATTERNS holds one a line;
    # the lists of names split on commas, each option on its own separator.
    monkeypatch.setenv("FREEZEFRAME_REDACT_PATTERNS", "sk-[a-z]+ x\nid: [0-9, ]+")
    monkeypatch.setenv("FREEZEFRAME_REDACT_HEADERS", "x-one,x two")
    # Under the group's context, as the command line makes it: a context of its own would
    # make click cache `run`'s help option without the group's -h (and docs/cli.md's check,
    # in the same worker later, would find it gone).
    with cli.main.make_context("freezeframe", ["run"]) as group:
        parsed = cli.main.commands["run"].make_context("run", [], parent=group)
    assert parsed.params["redact_patterns"] == ("sk-[a-z]+ x", "id: [0-9, ]+")
    assert parsed.params["redact_headers"] == ("x-one", "x two")


def test_search_that_finds_nothing_says_so(data_dir: Path) -> None:
    result = invoke("search", "nothing-here-xyz", "--data-dir", str(data_dir))
    assert result.exit_code == 0
    assert result.stdout == "nothing found for 'nothing-here-xyz'\n"
    within = invoke(
        "search", "nothing-here-xyz", "--cassette", "orders", "--data-dir", str(data_dir)
    )
    assert within.stdout == "nothing found for 'nothing-here-xyz' in cassette 'orders'\n"
    as_json = invoke("search", "nothing-here-xyz", "--json", "--data-dir", str(data_dir))
    assert json.loads(as_json.stdout) == []


def test_set_with_a_bare_string_says_it_needs_quotes(data_dir: Path) -> None:
    result = invoke(
        "edit", "orders", "0", "--into", "shipped", "--set", "$.status=shipped",
        "--data-dir", str(data_dir),
    )  # fmt: skip
    assert_one_line_error(
        result, "--set '$.status=shipped'", """a string needs quotes: '$.status="shipped"'"""
    )
    fixed = invoke(
        "edit", "orders", "0", "--into", "shipped", "--set", '$.status="shipped"',
        "--data-dir", str(data_dir),
    )  # fmt: skip
    assert fixed.exit_code == 0, fixed.stderr
    shown = json.loads(invoke("show", "shipped", "0", "--json", "--data-dir", str(data_dir)).stdout)
    assert json.loads(shown["response"]["body"]["text"])["status"] == "shipped"


def test_import_into_an_empty_directory_makes_the_store_and_says_so(
    data_dir: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "orders.jsonl"
    assert (
        invoke("export", "orders", "-o", str(exported), "--data-dir", str(data_dir)).exit_code == 0
    )
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    done = freezeframe("import", str(exported), cwd=fresh)
    assert done.returncode == 0, done.stderr
    store = fresh / ".freezeframe" / "freezeframe.db"
    assert done.stderr == f"freezeframe: made a new store at sqlite:///{store}\n"
    assert "orders: imported 3 exchanges" in done.stdout
    listed = freezeframe("ls", "--json", cwd=fresh)
    assert [row["name"] for row in json.loads(listed.stdout)] == ["orders"]
    again = freezeframe("import", str(exported), "--as", "orders-2", cwd=fresh)
    assert again.returncode == 0 and again.stderr == ""  # the store is there now


@pytest.mark.parametrize("kind", ["jsonl", "har"])
def test_a_refused_import_into_an_empty_directory_leaves_nothing(
    data_dir: Path, tmp_path: Path, kind: str
) -> None:
    exported = tmp_path / f"orders.{kind}"
    export = ("export", "orders", "-o", str(exported), "--format", kind)
    assert invoke(*export, "--data-dir", str(data_dir)).exit_code == 0
    if kind == "jsonl":  # the last exchange is damaged: refused once the store is made
        lines = exported.read_text().splitlines()
        exported.write_text("\n".join([*lines[:-1], lines[-1][:40]]) + "\n")
    else:  # a capture: keyed with the data dir's key, which the import makes first
        document = json.loads(exported.read_text())
        document["log"]["entries"][-1]["startedDateTime"] = "yesterday"
        exported.write_text(json.dumps(document))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    done = freezeframe("import", str(exported), "--as", "orders", cwd=fresh)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "made a new store" not in done.stderr
    assert list(fresh.iterdir()) == [], "no store, no data dir, no key"
    elsewhere = tmp_path / "new" / "data"
    refused = invoke("import", str(exported), "--as", "orders", "--data-dir", str(elsewhere))
    assert refused.exit_code == 1
    assert not (tmp_path / "new").exists()


def test_a_refused_import_into_a_store_leaves_it_as_it_was(data_dir: Path, tmp_path: Path) -> None:
    exported = tmp_path / "orders.jsonl"
    assert (
        invoke("export", "orders", "-o", str(exported), "--data-dir", str(data_dir)).exit_code == 0
    )
    header, *rest = exported.read_text().splitlines()
    stray = {"seq": 99, "at": 1.0, "text": "on an exchange the file does not hold"}
    noted = json.dumps({**json.loads(header), "notes": [stray]})
    exported.write_text("\n".join([noted, *rest]) + "\n")
    before = sorted(p.name for p in data_dir.iterdir())
    done = invoke("import", str(exported), "--as", "orders-2", "--data-dir", str(data_dir))
    assert_one_line_error(done, "exchange 99 of 'orders-2'")
    listed = json.loads(invoke("ls", "--json", "--data-dir", str(data_dir)).stdout)
    assert [row["name"] for row in listed] == ["orders", "other"], "no import without its notes"
    assert sorted(p.name for p in data_dir.iterdir()) == before


def test_readers_without_a_data_dir_read_the_running_proxys_store(
    data_dir: Path, tmp_path: Path, upstream_ca_file: Path
) -> None:
    agent_dir = tmp_path / "agent"  # where the agent runs: no .freezeframe here
    agent_dir.mkdir()
    proxy = ProxyProcess(data_dir, mode="replay", cassette="orders", upstream_ca=upstream_ca_file)
    proxy.start()
    try:
        env = {"FREEZEFRAME_ADMIN": f"127.0.0.1:{proxy.admin_port}"}
        said = ""  # one store to read: nothing to say on every command (issue 32)
        listed = freezeframe("ls", "--json", cwd=agent_dir, env=env)
        assert listed.returncode == 0, listed.stderr
        assert [row["name"] for row in json.loads(listed.stdout)] == ["orders", "other"]
        assert listed.stderr == said
        shown = freezeframe("show", "orders", "2", "--json", cwd=agent_dir, env=env)
        assert json.loads(shown.stdout)["seq"] == 2 and shown.stderr == said
        verified = freezeframe("verify", "orders", cwd=agent_dir, env=env)
        assert "orders: intact (3 exchanges)" in verified.stdout
        found = freezeframe("search", "chatcmpl-1", cwd=agent_dir, env=env)
        assert "orders" in found.stdout
        given = freezeframe("ls", "--data-dir", str(agent_dir / "own"), cwd=agent_dir, env=env)
        assert given.returncode == 1 and "no store at" in given.stderr  # a flag still wins
    finally:
        proxy.stop()
    alone = freezeframe("ls", cwd=agent_dir, env=env)
    assert alone.returncode == 1
    assert alone.stderr == (
        f"freezeframe: error: no store at {agent_dir / '.freezeframe' / 'freezeframe.db'}; "
        "pass --data-dir or --store\n"
    )


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("usage", '{"a":' * 5000 + "1" + "}" * 5000, "its stored usage is not readable"),
        ("context", '["run-1"]', "its stored context is a JSON list, not an object"),
    ],
    ids=["usage-5000-deep", "context-a-list"],
)
@pytest.mark.parametrize(
    "args",
    [["show", "orders"], ["show", "orders", "1"], ["export", "orders", "-o", "out.jsonl"]],
    ids=" ".join,
)
def test_a_tampered_row_is_refused_in_one_line(
    data_dir: Path, tmp_path: Path, column: str, value: str, said: str, args: list[str]
) -> None:
    """A row edited in the database ended show and export in a RecursionError or an
    AttributeError traceback; they name the exchange and the column instead."""
    import sqlite3

    with sqlite3.connect(data_dir / "freezeframe.db") as db:
        changed = db.execute(f"UPDATE exchanges SET {column} = ? WHERE seq = 1", (value,))
        assert changed.rowcount == 1  # "other" has only seq 0
    done = freezeframe(*args, "--data-dir", str(data_dir), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"freezeframe: error: exchange #1: {said}"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
