"""What a newcomer still tripped over on the first day, round three (issue 32): each test is
one point of the issue, run as a user runs the command."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.exchanges import plausible_exchange, plausible_response
from support.proxy import ProxyProcess, free_port
from test_cli import record

from freezeframe.canonicalize.providers import provider_of
from freezeframe.evidence.signatures import SIGNATURE_VERSION
from freezeframe.evidence.triage import find_group, numbers
from freezeframe.storage import RecheckResult, Signals, open_store


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


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("freezeframe: error: ") and done.stderr.count("\n") == 1, (
        done.stderr
    )
    for fragment in fragments:
        assert fragment in done.stderr


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    record(path, "orders", 3)
    limited = {
        "error": {
            "message": "Rate limit reached for gpt-4o in organization org-x7Qk2mZ9 on tokens "
            "per min (TPM): Limit 30000, Used 29412, Requested 1530. Please try again in 1.9s. "
            "Visit https://platform.openai.com/account/rate-limits to learn more.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    record(path, "limited", 2, status=429, answer=json.dumps(limited).encode())
    record(path, "broken", 1, status=500)
    return path


def test_bare_freezeframe_prints_its_usage_and_exits_0(tmp_path: Path) -> None:
    """Point 10: as git and pip do; it was exit 2 with the help squashed into one error line."""
    done = freezeframe(cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: ") and "Commands:" in done.stdout
    assert "  exec " in done.stdout and done.stderr == ""


def test_exec_replay_of_a_cassette_with_no_recordings_runs_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    """Point 7: the agent used to start anyway and end in its own 25-line traceback; a
    missing cassette in a store that exists is refused before anything runs."""
    ran = tmp_path / "ran"
    command = ["--", sys.executable, "-c", f"open({str(ran)!r}, 'w')"]
    done = freezeframe(
        "exec",
        "--mode",
        "replay",
        "--cassette",
        "orderz",
        "--data-dir",
        str(data_dir),
        *command,
        cwd=tmp_path,
    )
    one_line_error(done, "cassette 'orderz' has no recordings", "known: orders", "nothing was run")
    nowhere = tmp_path / "nowhere"
    done = freezeframe(
        "exec",
        "--mode",
        "replay",
        "--cassette",
        "orders",
        "--data-dir",
        str(nowhere),
        *command,
        cwd=tmp_path,
    )
    # With no store anywhere nothing was recorded to mistake it for: a command that calls
    # nothing (exec's clock and isolation checks) runs, as it always did.
    assert done.returncode == 0, done.stderr
    assert ran.exists()


def test_env_wait_waits_for_a_proxy_that_is_still_starting(
    data_dir: Path, tmp_path: Path, upstream_ca_file: Path
) -> None:
    """Point 1: `run ... &` then `eval "$(freezeframe env)"` asked before the proxy answered."""
    proxy = ProxyProcess(data_dir, mode="record", cassette="orders", upstream_ca=upstream_ca_file)
    env = {"FREEZEFRAME_ADMIN": f"127.0.0.1:{proxy.admin_port}"}
    at_once = freezeframe("env", cwd=tmp_path, env=env)
    one_line_error(at_once, "no freezeframe answers")
    waiting = subprocess.Popen(
        [sys.executable, "-P", "-m", "freezeframe", "env", "--wait", "60"],
        cwd=tmp_path,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proxy.start()
        out, err = waiting.communicate(timeout=90)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        proxy.stop()
    assert waiting.returncode == 0, err
    assert f"export HTTPS_PROXY=http://127.0.0.1:{proxy.port}" in out
    gone = freezeframe("env", "--wait", "0.5", cwd=tmp_path, env=env)
    one_line_error(gone, "no freezeframe answers", "(waited 0.5 s)")


def signed(data_dir: Path) -> list[dict[str, object]]:
    done = freezeframe("triage", "--rebuild", "--json", "--data-dir", str(data_dir), cwd=data_dir)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["groups"])


def test_a_group_is_named_by_its_number_a_unique_prefix_or_its_signature(
    data_dir: Path,
) -> None:
    """Point 5: signatures run to 200 characters and recheck took them only whole."""
    groups = signed(data_dir)
    assert [g["number"] for g in groups] == [1, 2]
    first, second = (str(g["signature"]) for g in groups)
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        assert numbers(store) == {first: 1, second: 2}
        assert find_group(store, "2").signature == second
        assert find_group(store, first).signature == first
        unique = first[: len(os.path.commonprefix([first, second])) + 1]
        assert find_group(store, unique).signature == first
        with pytest.raises(ValueError, match=r"begins 2 signatures \(groups 1, 2\)"):
            find_group(store, "provider_error POST")
        with pytest.raises(ValueError, match="no failure group number 3: .* lists 2 groups"):
            find_group(store, "3")


def test_recheck_refuses_an_ambiguous_group_before_running_anything(
    data_dir: Path, tmp_path: Path
) -> None:
    signed(data_dir)
    ran = tmp_path / "ran"
    done = freezeframe(
        "recheck",
        "provider_error",
        "--data-dir",
        str(data_dir),
        "--",
        sys.executable,
        "-c",
        f"open({str(ran)!r}, 'w')",
        cwd=tmp_path,
    )
    one_line_error(done, "begins 2 signatures", "the group's number")
    assert not ran.exists()


def test_triage_at_80_columns_shows_each_signature_whole_with_its_number(
    data_dir: Path,
) -> None:
    """Point 5: the table cut signatures to ten characters at 80 columns."""
    groups = signed(data_dir)
    screen = on_a_terminal(
        ["triage", "--data-dir", str(data_dir)], {"COLUMNS": "80", "LINES": "24"}
    )
    lines = screen.splitlines()
    assert all(len(line) <= 80 for line in lines), screen
    assert lines[0].startswith("#1  ")
    folded = " ".join(line.strip() for line in lines if line.startswith("    "))
    for group in groups:
        assert str(group["signature"]) in folded


def on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What ``freezeframe ARGS`` prints to a terminal (a pseudo-terminal) ``COLUMNS`` wide."""
    main, child = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FREEZEFRAME_")}
    process = subprocess.Popen(
        [sys.executable, "-P", "-m", "freezeframe", *args],
        stdout=child,
        stderr=subprocess.PIPE,
        env={**clean, "NO_COLOR": "1", "TERM": "dumb", **env},
    )
    os.close(child)
    printed = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if not select.select([main], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            printed += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        errors = process.stderr.read()
        process.stderr.close()
    assert not errors, errors
    return printed.decode().replace("\r\n", "\n")


def test_rm_counts_in_words(data_dir: Path) -> None:
    """Point 13: "removed the 1 exchanges"."""
    done = freezeframe("rm", "broken", "--yes", "--data-dir", str(data_dir), cwd=data_dir)
    assert done.returncode == 0, done.stderr
    assert "removed cassette 'broken': 1 exchange, 0 bodies (0 B) that" in done.stdout


def test_the_top_level_help_teaches_what_the_readme_does(tmp_path: Path) -> None:
    """Point 13: the help taught SSL_CERT_FILE=$(freezeframe ca --bundle), the README env."""
    done = freezeframe("--help", cwd=tmp_path)
    assert 'eval "$(freezeframe env --wait 30)"' in done.stdout
    assert "ca --bundle" not in done.stdout


def test_signatures_keep_model_names_and_older_ones_are_signed_again_on_rebuild(
    data_dir: Path,
) -> None:
    """Point 13: ``gpt-4o`` read ``gpt-{n}o`` in a signature. The rules changed, so their
    version did: a store signed by the older rules keeps its old signatures, triage says
    how many and asks for ``--rebuild``, which signs them again (a group's last recheck
    following its new signature); then it asks no more."""
    (limited,) = [g for g in signed(data_dir) if "429" in g["signature"]]
    assert "Rate limit reached for gpt-4o in organization {id}" in limited["signature"]
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        rows = store.triage_rows(cassettes=["limited"], traces=True)
        older = {
            row.seq: Signals(
                SIGNATURE_VERSION - 1,
                row.kind,
                (row.signature or "").replace("gpt-4o", "gpt-{n}o"),
                row.trace,
                row.run_failures,
            )
            for row in rows
        }
        store.store_signals("limited", older)
        (old,) = {s.signature for s in older.values() if s.signature}
        store.keep_recheck(RecheckResult(old, 1_790_000_000.0, '{"runs": []}'))
    argv = ("--data-dir", str(data_dir))

    stale = freezeframe("triage", "--json", *argv, cwd=data_dir)
    assert stale.returncode == 0, stale.stderr
    assert stale.stderr == (
        f"2 exchanges have no signature under the current rules (v{SIGNATURE_VERSION}); "
        "run `freezeframe triage --rebuild` to include them\n"
    )
    assert any("gpt-{n}o" in g["signature"] for g in json.loads(stale.stdout)["groups"])

    rebuilt = freezeframe("triage", "--rebuild", "--json", *argv, cwd=data_dir)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "worked out the signatures of 2 exchanges that had none under the current" in (
        rebuilt.stderr
    )
    signatures = [g["signature"] for g in json.loads(rebuilt.stdout)["groups"]]
    assert [s for s in signatures if "429" in s] == [limited["signature"]]
    again = freezeframe("triage", "--json", *argv, cwd=data_dir)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        followed = store.rechecks()[limited["signature"]]
    assert (followed.at, followed.document) == (1_790_000_000.0, '{"runs": []}'), (
        "the group's last recheck follows it to its new signature"
    )


def test_show_names_the_local_store_when_the_running_proxys_lacks_the_cassette(
    data_dir: Path, tmp_path: Path, upstream_ca_file: Path
) -> None:
    """Point 6: a proxy running for another project decided which store `show` read."""
    project = tmp_path / "project"
    record(project / ".freezeframe", "mine", 1)
    proxy = ProxyProcess(data_dir, mode="replay", cassette="orders", upstream_ca=upstream_ca_file)
    proxy.start()
    try:
        env = {"FREEZEFRAME_ADMIN": f"127.0.0.1:{proxy.admin_port}"}
        shown = freezeframe("show", "mine", cwd=project, env=env)
        said, error = shown.stderr.splitlines()
        assert said.startswith(f"freezeframe: reading the store of the proxy at {proxy.admin_url}")
        assert shown.returncode == 1 and error.startswith("freezeframe: error: no cassette named")
        assert error.endswith(
            "the running proxy's; .freezeframe/ here holds 'mine': "
            "pass --data-dir .freezeframe to read that store"
        )
        listed = freezeframe("ls", cwd=project, env=env)
        assert listed.stderr == said + "\n"
        local = freezeframe("show", "mine", "--data-dir", ".freezeframe", cwd=project, env=env)
        assert local.returncode == 0, local.stderr
    finally:
        proxy.stop()


def test_edit_with_a_json_error_body_on_a_streamed_answer_types_it_as_json(
    tmp_path: Path,
) -> None:
    """Point 12: the edited 429 kept ``text/event-stream`` and an empty reason phrase."""
    data_dir = tmp_path / "data"
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        streamed = plausible_response(
            headers=((b"content-type", b"text/event-stream; charset=utf-8"),),
            body=b'data: {"choices": []}\n\ndata: [DONE]\n\n',
        )
        store.submit(
            plausible_exchange(store.reserve("live", "k"), cassette="live", response=streamed)
        )
    error = tmp_path / "rate-limited.json"
    error.write_text('{"error": {"message": "Rate limit reached", "type": "rate_limit"}}')
    done = freezeframe(
        "edit",
        "live",
        "0",
        "--into",
        "limited",
        "--status",
        "429",
        "--response-body",
        str(error),
        "--data-dir",
        str(data_dir),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "content-type: text/event-stream -> application/json" in done.stdout
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        answer = store.exchange("limited", 0).recorded.response
    assert answer is not None
    assert (answer.status, answer.reason) == (429, "Too Many Requests")
    assert [v for n, v in answer.headers if n.lower() == b"content-type"] == [b"application/json"]


def test_recheck_says_one_line_per_run_and_keeps_the_details_in_a_log(
    data_dir: Path, tmp_path: Path
) -> None:
    """Point 11: 104 lines for four runs (proxy logs, the agent's tracebacks)."""
    groups = signed(data_dir)
    (limited,) = [g for g in groups if "429" in str(g["signature"])]
    ports = ["--listen", f"127.0.0.1:{free_port()}", "--admin", f"127.0.0.1:{free_port()}"]
    agent = "import sys; print('the agent talks'); sys.exit('Traceback: the agent fell over')"
    done = freezeframe(
        "recheck",
        str(limited["number"]),
        "--data-dir",
        str(data_dir),
        *ports,
        "--",
        sys.executable,
        "-c",
        agent,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "FAILED  limited@run-7: exit 1",
        "0 of 1 runs pass; the group is still failing",
    ]
    (note,) = done.stderr.splitlines()
    log = Path(note.split("logs: ", 1)[1].split(" (-v", 1)[0])
    try:
        details = log.read_text()
    finally:
        log.unlink()
    assert "the agent talks" in details and "the agent fell over" in details
    assert "freezeframe replay: proxy on" in details


def test_triage_asks_for_no_rebuild_after_an_edit(data_dir: Path, tmp_path: Path) -> None:
    """Point 8: after ordinary what-if use, triage nagged "N exchanges have no signature",
    and --rebuild then reported another number."""
    signed(data_dir)
    edited = freezeframe(
        "edit",
        "limited",
        "1",
        "--into",
        "limited-fixed",
        "--status",
        "200",
        "--data-dir",
        str(data_dir),
        cwd=tmp_path,
    )
    assert edited.returncode == 0, edited.stderr
    triaged = freezeframe("triage", "--json", "--data-dir", str(data_dir), cwd=tmp_path)
    assert triaged.returncode == 0 and triaged.stderr == ""
    groups = json.loads(triaged.stdout)["groups"]
    (limited,) = [g for g in groups if "429" in g["signature"]]
    assert "limited-fixed@run-7" in limited["runs"], "the fork's unedited 429 is signed"
    assert limited["count"] == 3, "the edited answer is no longer a 429"


def test_show_lists_each_model_calls_tokens(tmp_path: Path) -> None:
    """Point 22: the README says `show` lists tokens; its list had no such column."""
    data_dir = tmp_path / "data"
    with open_store(f"sqlite:///{data_dir / 'freezeframe.db'}") as store:
        for key, usage in (
            ("a", {"prompt_tokens": 41, "completion_tokens": 7, "total_tokens": 48}),
            ("b", {"input_tokens": 30, "cache_read_input_tokens": 5, "output_tokens": 9}),
        ):
            facts = {"model": "gpt-4o-mini", "usage": usage}
            store.submit(
                plausible_exchange(
                    store.reserve("counted", key), cassette="counted", key=key, facts=facts
                )
            )
    done = freezeframe("show", "counted", "--data-dir", str(data_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tokens in/out" in done.stdout
    assert " 41/7 " in done.stdout and " 35/9 " in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("host", "provider"),
    [
        ("api.mistral.ai", "mistral_ai"),
        ("api.groq.com", "groq"),
        ("api.openai.com", "openai"),
        ("localhost", "openai"),
    ],
)
def test_a_service_serving_openais_api_is_labelled_by_its_host(host: str, provider: str) -> None:
    """Point 22: Mistral and Groq were labelled ``openai``."""
    assert provider_of("openai.chat-completions", host, "/v1/chat/completions") == provider
    assert provider_of("openai.chat-completions", host, "/openai/v1/chat/completions") == provider
