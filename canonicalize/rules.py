"""Key rules a user writes in TOML, for what the built-in profiles cannot know about their agent.

A profile knows what an API's fields mean; only the user knows that their agent stamps today's
date into its system prompt, or sends a tenant id that does change the answer. A rules file says
so, one `[[rule]]` per concern:

```toml
[[rule]]
host = "api.openai.com"            # glob on the host, case-insensitive; default "*"
path = "/v1/chat/completions"      # glob on the path (without query); default "*"
profile = "openai.*"               # glob on the profile explain shows; default "*"
ignore = ["$.messages[*].name", "$.tools[*].function.description"]
keep = ["$.metadata.tenant"]       # kept even though the profile would drop it
ignore_query = ["ts", "nonce"]     # query parameters left out of the key
key_headers = ["x-tenant-id"]      # headers put into the key

[[rule.substitute]]                # a regex replacement inside string values
path = "$.messages[*].content"     # where; default "$..*", every string in the body
pattern = '\\d{4}-\\d{2}-\\d{2}T[0-9:.]+Z?'
replacement = "<timestamp>"        # as for re.sub: \\1 and \\g<name> refer to groups
```

Every rule whose globs match a request applies, in file order. What a rule removes is credited
to `user:<n>` (the rule's position in the file) and what it rewrites to `user:<n>:substitute`,
so explain can say which rule shaped a key. `ignore` and `keep` take JSON paths (see
`jsonpath`); in form and multipart bodies, `$.name` addresses the field `name`. `keep` wins over
every drop, the profile's, the configured volatile fields' and other rules' `ignore`, because
it is the more deliberate statement. Substitutions run after the drops, on JSON bodies only.

The same file may hold `[[route]]` tables (`host`, `path`, `mode`: replay, record, passthrough
or auto) that the proxy reads to decide, in a replay, which requests go upstream for real; they
do not touch keys.

The file is checked when loaded: bad TOML, unknown keys, wrong types, bad JSON paths and bad
regular expressions raise RulesError naming the file and line, since a rule that silently does
nothing is found only later, as a replay that misses.
"""

import re
import tomllib
from pathlib import Path

from .ruleschema import SchemaError, build_rule_set
from .ruleset import Route, Rule, RuleSet, Substitution
from .tomllines import TomlLines

__all__ = ["Route", "Rule", "RuleSet", "RulesError", "Substitution", "load_rules", "parse_rules"]

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_AT_END = re.compile(r"\s*\(at end of document\)$")


class RulesError(ValueError):
    """A rules file that cannot be used, as `<file>:<line>: <what is wrong>`."""


def load_rules(path: Path) -> RuleSet:
    """Read and check a rules file; the only I/O in this package."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RulesError(f"{path}: cannot read the rules file: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise RulesError(f"{path}:{line}: not UTF-8, which TOML requires") from None
    return parse_rules(text, str(path))


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """Check rules given as text; `source` names them in errors."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RulesError(_syntax_error(str(error), text, source)) from None
    except RecursionError:
        raise RulesError(
            f"{source}:{_deepest_line(text)}: invalid TOML: arrays or inline tables nested "
            "too deep to read"
        ) from None
    try:
        return build_rule_set(document)
    except SchemaError as error:
        line = TomlLines(text).of(error.table, error.key)
        raise RulesError(f"{source}:{line}: {_where(error.table)}{error.message}") from None


def _deepest_line(text: str) -> int:
    """The line holding the most opening brackets, where a too-deep nesting is written."""
    lines = text.splitlines() or [""]
    counts = [line.count("[") + line.count("{") for line in lines]
    return counts.index(max(counts)) + 1


def _syntax_error(message: str, text: str, source: str) -> str:
    """Move tomllib's "(at line L, column C)" to the front, where editors look for it."""
    position = _TOML_POSITION.search(message)
    if position is not None:
        line, column = position.groups()
        return f"{source}:{line}: invalid TOML: {message[: position.start()]} (column {column})"
    last_line = max(text.count("\n") + (0 if text.endswith("\n") else 1), 1)
    return f"{source}:{last_line}: invalid TOML: {_TOML_AT_END.sub('', message)}"


def _where(table: tuple[str | int, ...]) -> str:
    """Say which rule or route a complaint is about, since several may use the same keys."""
    if len(table) < 2:
        return ""
    where = f"{table[0]} {int(table[1]) + 1}"
    if len(table) >= 4:
        where += f", substitute {int(table[3]) + 1}"
    return f"{where}: "
