"""The key rules in force, built in one place for the proxy and for ``explain``.

``explain`` must say exactly what the running proxy would compute, so both ask here.
Credentials in query strings (``?key=``, ``?api_key=``) are left out of the key just as
the ``Authorization`` header is: they are stored only as keyed fingerprints, which differ
between installs, and a different key must not turn a recording into a miss.
"""

from __future__ import annotations

from pathlib import Path

from freezeframe.canonicalize import KeyConfig, RuleSet, load_rules
from freezeframe.storage.redaction import SECRET_QUERY

RULES_FILENAME = "rules.toml"


def rules_path(flag: str | None, data_dir: Path) -> Path | None:
    """``--rules`` / ``FREEZEFRAME_RULES`` if given, else ``<data dir>/rules.toml`` if it exists."""
    if flag:
        return Path(flag).expanduser()
    default = data_dir / RULES_FILENAME
    return default if default.is_file() else None


def key_config(rules: Path | None = None) -> KeyConfig:
    """Raises ``canonicalize.RulesError`` (a ``ValueError``) naming the file and line."""
    return key_config_of(load_rules(rules) if rules is not None else RuleSet.empty())


def key_config_of(rules: RuleSet) -> KeyConfig:
    """The key configuration with ``rules`` (already read): ``rules suggest --apply`` keys
    under a file it has not written yet."""
    return KeyConfig(volatile_query=SECRET_QUERY, rules=rules)
