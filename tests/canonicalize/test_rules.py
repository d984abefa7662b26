"""User rules: a TOML file checked at load, with errors naming the line, that adds to what the
profiles drop, keeps what they would drop, and rewrites strings before keying."""

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import (
    KeyConfig,
    RequestView,
    Rule,
    RulesError,
    RuleSet,
    Stripped,
    Substitution,
    canonicalize,
    load_rules,
    parse_rules,
)
from freezeframe.canonicalize.jsonbody import MAX_DEPTH, short_digest
from freezeframe.canonicalize.jsonpath import parse_path

EXAMPLE = r"""
# Rules for the support agent.
[[rule]]
host = "API.openai.com"
path = "/v1/chat/completions"
ignore = ["$.messages[*].name", "$.tools[*].function.description"]
keep = ["$.metadata.tenant"]
ignore_query = ["ts", "nonce"]
key_headers = ["X-Tenant-Id"]

[[rule.substitute]]
path = "$.messages[*].content"
pattern = "\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z?"
replacement = "<timestamp>"

[[rule]]
profile = "mcp"
[[rule.substitute]]
pattern = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
replacement = "<uuid>"
"""


def test_the_documented_format_loads_into_rules() -> None:
    rules = parse_rules(EXAMPLE, "agent.toml")
    first, second = rules.rules
    assert first == Rule(
        number=1,
        host="api.openai.com",
        path="/v1/chat/completions",
        ignore=(parse_path("$.messages[*].name"), parse_path("$.tools[*].function.description")),
        keep=(parse_path("$.metadata.tenant"),),
        ignore_query=frozenset({"ts", "nonce"}),
        key_headers=frozenset({"x-tenant-id"}),
        substitute=(
            Substitution(
                parse_path("$.messages[*].content"),
                r"\d{4}-\d{2}-\d{2}T[0-9:.]+Z?",
                "<timestamp>",
            ),
        ),
    )
    assert (second.number, second.profile, second.substitute[0].path.text) == (2, "mcp", "$..*")


def test_the_module_documentation_example_is_valid() -> None:
    import freezeframe.canonicalize.rules as module

    assert module.__doc__ is not None
    example = module.__doc__.split("```toml\n", 1)[1].split("```", 1)[0]
    assert len(parse_rules(example).rules) == 1


def test_an_empty_file_has_no_rules() -> None:
    assert parse_rules("# nothing yet\n") == RuleSet.empty()
    assert KeyConfig().rules == RuleSet.empty()


def test_load_rules_reads_the_file_and_names_it_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(EXAMPLE)
    assert load_rules(path) == parse_rules(EXAMPLE)
    path.write_text('[[rule]]\nhost = "a"\n\n  ignore = "$.x"\n')
    with pytest.raises(RulesError, match=rf"^{re.escape(str(path))}:4: rule 1: 'ignore' must"):
        load_rules(path)
    path.write_bytes(b'[[rule]]\nhost = "\xff"\n')
    with pytest.raises(RulesError, match=rf"^{re.escape(str(path))}:2: not UTF-8"):
        load_rules(path)
    with pytest.raises(RulesError, match="cannot read the rules file"):
        load_rules(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            '[[rule]]\nhost = "api.openai.com\n',
            "r.toml:2: invalid TOML: Illegal character '\\n' (column 23)",
        ),
        (
            "\n\n[[rule]]\nignore = [\n  1,,\n]\n",
            "r.toml:5: invalid TOML: Invalid value (column 5)",
        ),
        ('[[rule]]\nignore = ["$.a"', "r.toml:2: invalid TOML: "),
        (
            '[[rule]]\nhost = "a"\n\n[[rule]]\npath = "/x"\nigore = ["$.a"]\n',
            "r.toml:6: rule 2: unknown key 'igore' in [[rule]]; known: host, path, profile, "
            "ignore, keep, ignore_query, key_headers, substitute",
        ),
        (
            '[[rule]]\n\n[[rule.substitute]]\npattern = "a"\nreplacement = "b"\nflags = "i"\n',
            "r.toml:6: rule 1, substitute 1: unknown key 'flags' in [[rule.substitute]]",
        ),
        (
            '[[rule]]\n[[rule.substitute]]\npattern = "a"\nreplacement = ""\n'
            '[[rule.substitute]]\npattern = "(unclosed"\nreplacement = ""\n',
            "r.toml:6: rule 1, substitute 2: bad pattern: missing ): (unclosed",
        ),
        (
            '[[rule]]\n[[rule.substitute]]\npattern = "(a)"\nreplacement = "\\\\2"\n',
            "r.toml:4: rule 1, substitute 1: bad replacement: invalid group reference 2",
        ),
        (
            '[[rule]]\n[[rule.substitute]]\npattern = "(a)"\nreplacement = "\\\\g<n>"\n',
            "r.toml:4: rule 1, substitute 1: bad replacement: unknown group name 'n'",
        ),
        (
            '[[rule]]\n[[rule.substitute]]\nreplacement = ""\n',
            "r.toml:2: rule 1, substitute 1: missing required key 'pattern'",
        ),
        (
            '[[rule]]\nhost = "a"\n[[rule]]\nhost = 443\n',
            "r.toml:4: rule 2: 'host' must be a string, not an integer",
        ),
        (
            '[[rule]]\nkey_headers = ["a", true]\n',
            "r.toml:2: rule 1: 'key_headers' must hold only strings; item 2 is a boolean",
        ),
        (
            '[[rule]]\nignore = ["$.messages[*"]\n',
            "r.toml:2: rule 1: bad ignore: JSON path '$.messages[*': expected [*], [number]",
        ),
        ('[[rule]]\nkeep = ["$"]\n', "r.toml:2: rule 1: bad keep: '$' is the whole body"),
        ('[[rule]]\nignore_query = [""]\n', "r.toml:2: rule 1: bad ignore_query: names must"),
        (
            '[[rule]]\nsubstitute = "x"\n',
            "r.toml:2: rule 1: 'substitute' must be an array of tables",
        ),
        ('# rules\n[rule]\nhost = "a"\n', "r.toml:2: 'rule' must be an array of tables"),
        ("rule = 1\n", "r.toml:1: 'rule' must be an array of tables"),
        ('[[rule]]\nhost = "a"\n\n[[rules]]\n', "r.toml:4: unknown key 'rules'"),
        ("version = 2\n[[rule]]\n", "r.toml:1: unknown key 'version'"),
        (
            '[[rule]]\nhost = "a"\npath = """\n[[rule]]\nignore = 1\n"""\nignore = 1\n',
            "r.toml:7: rule 1: 'ignore' must be an array of strings, not an integer",
        ),
    ],
)
def test_errors_name_the_file_and_line(text: str, error: str) -> None:
    with pytest.raises(RulesError) as raised:
        parse_rules(text, "r.toml")
    assert str(raised.value).startswith(error)


# Rules applied.

OPENAI = RequestView(
    method="POST",
    scheme="https",
    host="api.openai.com",
    port=443,
    path="/v1/chat/completions",
    query=(),
    headers=(),
    body=b"",
    content_type="application/json",
)
ANTHROPIC = replace(OPENAI, host="api.anthropic.com", path="/v1/messages")


def keyed(view: RequestView, body: object, rules: str) -> tuple[str, tuple[Stripped, ...]]:
    config = KeyConfig(rules=parse_rules(rules))
    canonical = canonicalize(replace(view, body=json.dumps(body).encode()), config)
    return canonical.key, canonical.stripped


def agent_turn(when: str, request_id: str) -> dict[str, object]:
    return {
        "model": "claude-test-model",
        "max_tokens": 512,
        "system": [
            {"type": "text", "text": f"You are a support agent. Now: {when}. Request {request_id}."}
        ],
        "messages": [{"role": "user", "content": "Where is my parcel?"}],
    }


DATES_AND_IDS = r"""
[[rule]]
host = "api.anthropic.com"
[[rule.substitute]]
path = "$.system[*].text"
pattern = '\d{4}-\d{2}-\d{2}T[0-9:.]+Z?'
replacement = "<timestamp>"
[[rule.substitute]]
pattern = '(?i)[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}'
replacement = "<uuid>"
"""


def test_substitution_makes_prompts_with_other_timestamps_and_uuids_share_a_key() -> None:
    first = agent_turn("2025-01-02T03:04:05Z", "0b5e3f4c-9d1a-4c3b-8e2f-1a2b3c4d5e6f")
    second = agent_turn("2026-07-08T09:10:11.123Z", "AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE")
    first_key, stripped = keyed(ANTHROPIC, first, DATES_AND_IDS)
    second_key, _ = keyed(ANTHROPIC, second, DATES_AND_IDS)
    assert first_key == second_key
    assert keyed(ANTHROPIC, first, "")[0] != keyed(ANTHROPIC, second, "")[0]
    original = first["system"][0]["text"]  # type: ignore[index]
    rewritten = (
        "You are a support agent. Now: <timestamp>. Request 0b5e3f4c-9d1a-4c3b-8e2f-1a2b3c4d5e6f."
    )
    assert stripped == (
        Stripped("body:$.system[0].text", "user:1:substitute", short_digest(original)),
        Stripped("body:$.system[0].text", "user:1:substitute", short_digest(rewritten)),
    )
    changed_question = agent_turn("2025-01-02T03:04:05Z", "x") | {
        "messages": [{"role": "user", "content": "Cancel my order."}]
    }
    assert keyed(ANTHROPIC, changed_question, DATES_AND_IDS)[0] != first_key


def test_substitutions_run_in_file_order_across_rules() -> None:
    rules = """
[[rule]]
[[rule.substitute]]
pattern = "red"
replacement = "green"
[[rule]]
[[rule.substitute]]
path = "$.prompt"
pattern = "green"
replacement = "blue"
"""
    view = replace(OPENAI, path="/v1/other")
    assert keyed(view, {"prompt": "red"}, rules)[0] == keyed(view, {"prompt": "blue"}, rules)[0]
    assert keyed(view, {"note": "red"}, rules)[0] == keyed(view, {"note": "green"}, rules)[0]
    assert keyed(view, {"note": "red"}, rules)[0] != keyed(view, {"note": "blue"}, rules)[0]


def test_substitution_reaches_every_nested_string_but_no_member_name() -> None:
    rules = '[[rule]]\n[[rule.substitute]]\npattern = "\\\\d+"\nreplacement = "#"\n'
    view = replace(OPENAI, path="/v1/other")
    nested = {"a": [{"b": "x1"}, "y22"], "c3": 4}
    assert (
        keyed(view, nested, rules)[0] == keyed(view, {"a": [{"b": "x9"}, "y0"], "c3": 4}, rules)[0]
    )
    assert (
        keyed(view, nested, rules)[0] != keyed(view, {"a": [{"b": "x1"}, "y22"], "c4": 4}, rules)[0]
    )
    assert (
        keyed(view, nested, rules)[0] != keyed(view, {"a": [{"b": "x1"}, "y22"], "c3": 5}, rules)[0]
    )


def test_a_string_with_a_lone_surrogate_is_rewritten_around_it() -> None:
    rules = '[[rule]]\n[[rule.substitute]]\npattern = "\\\\d+"\nreplacement = "#"\n'
    view = replace(OPENAI, path="/v1/other")
    body = b'{"note": "x1\\ud800y22"}'
    same = b'{"note": "x9\\ud800y0"}'
    other = b'{"note": "x9\\udfffy0"}'

    def key(raw: bytes) -> str:
        return canonicalize(replace(view, body=raw), KeyConfig(rules=parse_rules(rules))).key

    assert key(body) == key(same) != key(other), "digits rewritten, the surrogate kept"


def test_ignore_drops_nested_parts_and_records_each_against_its_rule() -> None:
    rules = '[[rule]]\nignore = ["$.messages[*].name"]\n'
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi", "name": "bob"}]}
    key, stripped = keyed(OPENAI, body, rules)
    assert stripped == (Stripped("body:$.messages[0].name", "user:1", short_digest("bob")),)
    renamed = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi", "name": "eve"}]}
    assert key == keyed(OPENAI, renamed, rules)[0]
    assert key != keyed(OPENAI, renamed, "")[0]


def test_keep_protects_part_of_what_a_profile_drops() -> None:
    rules = '[[rule]]\nkeep = ["$.metadata.tenant"]\n'
    base = {"model": "gpt-4o", "messages": []}
    key, stripped = keyed(OPENAI, base | {"metadata": {"tenant": "a", "run": "1"}}, rules)
    assert stripped == (
        Stripped("body:$.metadata.run", "openai.chat-completions", short_digest("1")),
    )
    assert key == keyed(OPENAI, base | {"metadata": {"tenant": "a", "run": "2"}}, rules)[0]
    assert key != keyed(OPENAI, base | {"metadata": {"tenant": "b", "run": "1"}}, rules)[0]
    assert key != keyed(OPENAI, base, rules)[0]


def test_keep_wins_over_another_rules_ignore() -> None:
    rules = '[[rule]]\nignore = ["$.messages"]\n[[rule]]\nkeep = ["$.messages[0]"]\n'
    one = {"messages": [{"content": "a"}, {"content": "b"}]}
    other = {"messages": [{"content": "a"}, {"content": "c"}]}
    changed = {"messages": [{"content": "z"}, {"content": "b"}]}
    assert keyed(OPENAI, one, rules)[0] == keyed(OPENAI, other, rules)[0]
    assert keyed(OPENAI, one, rules)[0] != keyed(OPENAI, changed, rules)[0]


def test_an_object_that_stripping_leaves_empty_is_dropped_too() -> None:
    rules = '[[rule]]\nignore = ["$.options.trace", "$.tags[*]"]\n'
    view = replace(OPENAI, path="/v1/other")
    plain = {"prompt": "hi"}
    assert keyed(view, plain, rules)[0] == keyed(view, plain | {"options": {"trace": 1}}, rules)[0]
    assert keyed(view, plain, rules)[0] == keyed(view, plain | {"tags": ["a", "b"]}, rules)[0]
    assert keyed(view, plain, rules)[0] != keyed(view, plain | {"options": {}}, rules)[0]
    assert keyed(view, plain, rules)[0] != keyed(view, plain | {"tags": []}, rules)[0]


def test_ignore_query_and_key_headers() -> None:
    rules = '[[rule]]\nignore_query = ["ts"]\nkey_headers = ["X-Tenant-Id"]\n'
    config = KeyConfig(rules=parse_rules(rules))
    view = replace(OPENAI, query=(("ts", "1"), ("page", "2")), headers=(("x-tenant-id", "a"),))
    canonical = canonicalize(view, config)
    assert canonical.stripped == (Stripped("query:ts", "user:1", short_digest("1")),)
    assert json.loads(canonical.form)["headers"] == [["x-tenant-id", "a"]]
    assert (
        canonical.key == canonicalize(replace(view, query=(("page", "2"), ("ts", "9"))), config).key
    )
    assert canonical.key != canonicalize(replace(view, headers=(("X-Tenant-Id", "b"),)), config).key


@pytest.mark.parametrize(
    ("match", "applies"),
    [
        ('host = "*.openai.com"', True),
        ('host = "API.OPENAI.COM"', True),
        ('host = "api.anthropic.com"', False),
        ('path = "/v1/*"', True),
        ('path = "/V1/*"', False),
        ('profile = "openai.*"', True),
        ('profile = "generic.*"', False),
    ],
)
def test_rules_apply_where_their_globs_match(match: str, applies: bool) -> None:
    rules = f'[[rule]]\n{match}\nignore = ["$.prompt"]\n'
    _, stripped = keyed(OPENAI, {"prompt": "p"}, rules)
    assert bool(stripped) is applies


def test_the_canonical_form_shows_what_rules_leave() -> None:
    rules = parse_rules(EXAMPLE)
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "name": "bob", "content": "At 2025-01-02T03:04:05Z: hi"}],
        "metadata": {"tenant": "acme", "run": "7"},
        "user": "u-1",
    }
    view = replace(OPENAI, body=json.dumps(body).encode())
    canonical = canonicalize(view, KeyConfig(rules=rules))
    assert json.loads(canonical.form)["body"] == {
        "messages": [{"content": "At <timestamp>: hi", "role": "user"}],
        "metadata": {"tenant": "acme"},
        "model": "gpt-4o",
    }
    assert [(entry.part, entry.rule) for entry in canonical.stripped] == [
        ("body:$.messages[0].content", "user:1:substitute"),
        ("body:$.messages[0].name", "user:1"),
        ("body:$.metadata.run", "openai.chat-completions"),
        ("body:$.user", "openai.chat-completions"),
    ]


# Properties of rules applied to any body.

ANY_BODY_RULES = parse_rules(
    r"""
[[rule]]
ignore = ["$..name", "$.a[*]"]
keep = ["$..keep"]
[[rule.substitute]]
pattern = '\d+'
replacement = "#"
"""
)
json_values: st.SearchStrategy[object] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "name", "keep", "user", "x", "0"]), children, max_size=4
        )
    ),
    max_leaves=16,
)


def reordered(value: object) -> object:
    """The same JSON value with every object's members in reverse order."""
    if isinstance(value, dict):
        return {name: reordered(item) for name, item in reversed(value.items())}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


@given(json_values)
def test_rules_keep_keys_invariant_under_member_order_and_idempotent(value: object) -> None:
    config = KeyConfig(rules=ANY_BODY_RULES)
    view = replace(OPENAI, path="/v1/any")
    first = canonicalize(replace(view, body=json.dumps(value).encode()), config)
    second = canonicalize(replace(view, body=json.dumps(reordered(value)).encode()), config)
    assert (first.key, first.stripped) == (second.key, second.stripped)
    body = json.dumps(json.loads(first.form)["body"]).encode()
    again = canonicalize(replace(view, body=body), config)
    assert (again.key, again.stripped) == (first.key, ())


def test_rules_reach_the_deepest_body_without_exhausting_the_stack() -> None:
    depth = MAX_DEPTH - 1
    body = b'{"a":' * depth + b'{"name": "x", "keep": "1"}' + b"}" * depth
    rules = (
        '[[rule]]\nignore = ["$..name"]\n[[rule.substitute]]\npattern = "1"\nreplacement = "2"\n'
    )
    _, stripped = keyed(OPENAI, json.loads(body), rules)
    assert [entry.rule for entry in stripped] == ["user:1:substitute", "user:1"]


def test_routes_are_read_beside_the_rules_and_never_change_a_key() -> None:
    text = """
[[rule]]
ignore = ["$.user"]

[[route]]
host = "API.openai.com"
path = "/v1/*"
mode = "record"

[[route]]
host = "*.internal"
"""
    rules = parse_rules(text, "rules.toml")
    first, second = rules.routes
    assert (first.number, first.host, first.path, first.mode) == (
        1,
        "api.openai.com",
        "/v1/*",
        "record",
    )
    assert (second.host, second.path, second.mode) == ("*.internal", "*", "replay")
    assert rules.route("api.openai.com", "/v1/chat/completions") == first
    assert rules.route("api.openai.com", "/health") is None
    assert rules.route("orders.internal", "/orders") == second
    view = RequestView(
        method="POST", scheme="https", host="api.openai.com", port=443,
        path="/v1/chat/completions", query=(), headers=(), body=b'{"model": "m", "user": "u"}',
        content_type="application/json",
    )  # fmt: skip
    with_routes = canonicalize(view, KeyConfig(rules=rules))
    without = canonicalize(view, KeyConfig(rules=parse_rules('[[rule]]\nignore = ["$.user"]')))
    assert with_routes.key == without.key


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[[route]]\nmode = "live"', "rules.toml:2: route 1: unknown mode 'live'; choose one of"),
        (
            '[[route]]\nhost = "x"\nport = 8',
            "rules.toml:3: route 1: unknown key 'port' in [[route]]",
        ),
        ("route = 1", "rules.toml:1: 'route' must be an array of tables, written [[route]]"),
    ],
)
def test_a_bad_route_is_refused_naming_its_line(text: str, error: str) -> None:
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "rules.toml")
    assert str(caught.value).startswith(error)


def test_a_pattern_that_would_backtrack_for_ever_runs_in_linear_time() -> None:
    """A rule runs on every string of every request: ``(a+)+$`` on 100,000 ``a``s and a
    ``b`` would hold a backtracking engine for longer than anyone waits."""
    rules = '[[rule]]\n[[rule.substitute]]\npattern = "(a+)+$"\nreplacement = "<run>"\n'
    tool = replace(OPENAI, host="tools.internal", path="/lookup")
    long = "a" * 100_000 + "b"
    started = time.process_time()
    key, _ = keyed(tool, {"text": long, "tail": "aaa"}, rules)
    assert time.process_time() - started < 5
    assert key == keyed(tool, {"text": long, "tail": "a"}, rules)[0]
    assert key != keyed(tool, {"text": long, "tail": "b"}, rules)[0]


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [("(a)\\\\1", "invalid escape sequence"), ("foo(?=bar)", "invalid perl operator")],
    ids=["backreference", "lookahead"],
)
def test_a_pattern_re2_cannot_run_in_linear_time_is_refused_where_it_is_written(
    pattern: str, refused: str
) -> None:
    text = f'[[rule]]\n[[rule.substitute]]\npattern = "{pattern}"\nreplacement = "x"\n'
    with pytest.raises(RulesError) as error:
        parse_rules(text, "agent.toml")
    message = str(error.value)
    assert message.startswith("agent.toml:") and refused in message
    assert "no lookaround, no backreferences" in message and "\n" not in message
