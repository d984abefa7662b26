"""A rule the user writes makes a volatile prompt replayable; without it, the miss says where."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from click.testing import CliRunner
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe import cli

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]
RULES = """
[[rule]]
host = "localhost"
path = "/v1/chat/completions"

[[rule.substitute]]
path = "$.messages[*].content"
pattern = '\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?'
replacement = "<now>"
"""


def ask(base: str, now: datetime.datetime) -> str:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {
                    "role": "system",
                    "content": f"You are a helpful agent. The time is {now.isoformat()}.",
                },
                {"role": "user", "content": "What should I do next?"},
            ],
        )
        return answer.choices[0].message.content or ""


def test_a_prompt_with_the_current_time_replays_with_a_rule_and_misses_without(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    recorded_at = datetime.datetime(2026, 11, 26, 3, 0, 0)
    later = recorded_at + datetime.timedelta(hours=5, seconds=7)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)

    recorder = start_proxy(mode="record", args=("--rules", str(rules)))
    client_env(recorder)
    recorded = ask(upstream.base_url, recorded_at)
    recorder.stop()

    without = start_proxy(mode="replay")
    client_env(without)
    with pytest.raises(openai.NotFoundError) as miss:
        ask(upstream.base_url, later)
    body = miss.value.body
    assert isinstance(body, dict)
    paths = [d["path"] for d in body["nearest"][0]["differences"]]
    assert paths == ["$.messages[0].content"]
    without.stop()

    (data_dir / "rules.toml").write_text(RULES)  # the default place, no flag needed
    with_rule = start_proxy(mode="replay")
    client_env(with_rule)
    assert ask(upstream.base_url, later) == recorded
    assert upstream.connections == 1


def test_a_bad_rules_file_stops_the_start_with_its_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nhost = "x"\n\n[[rule.substitute]]\npattern = "(unclosed"\n')
    result = CliRunner().invoke(
        cli.main, ["run", "--data-dir", str(tmp_path / "data"), "--rules", str(rules)]
    )
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert message.startswith(f"freezeframe: error: {rules}:") and "\n" not in message
    line = int(message.split(f"{rules}:")[1].split(":")[0])
    assert line in (4, 5)
