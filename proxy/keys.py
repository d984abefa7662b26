"""The keys in force, built in one place for the proxy and for every command: the key rules
(``--rules``, else the data dir's rules.toml) and the redactor with the install's secret key.

``explain`` must say exactly what the running proxy would compute, so both ask here; so do
``import``, ``rekey``, ``edit``, ``resend`` and ``rules suggest``.
Credentials in query strings (``?key=``, ``?api_key=``) are left out of the key just as
the ``Authorization`` header is: they are stored only as keyed fingerprints, which differ
between installs, and a different key must not turn a recording into a miss.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from freezeframe.canonicalize import Canonical, KeyConfig, RequestView, RuleSet, load_rules
from freezeframe.proxy.settings import KEY_FILENAME
from freezeframe.storage.redaction import KEY_BYTES, SECRET_QUERY, Redactor, load_or_create_key

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


def rules_config(flag: str | None, data_dir: Path) -> KeyConfig:
    """The key configuration a command keys under: ``--rules`` if given, else the data dir's
    rules.toml if it exists, else no rules."""
    return key_config(rules_path(flag, data_dir))


def redactor_in(
    data_dir: Path, headers: Sequence[str] = (), patterns: Sequence[str] = ()
) -> Redactor:
    """The redactor of the install in ``data_dir``: its secret key (made on first use), so
    that a secret stored by any command has the fingerprint the proxy gives it."""
    return Redactor(load_or_create_key(data_dir / KEY_FILENAME), headers, patterns)


def typed_request(
    method: str, url: str, headers: Sequence[str], body: bytes, data_dir: Path
) -> tuple[RequestView, Path | None]:
    """A request as ``explain`` takes it, its secrets replaced by the markers the proxy with
    ``data_dir`` would store; raises ValueError for a header or URL that is not one. Without
    a secret key there nothing is created: the secrets are fingerprinted with a throwaway
    key, and the second value is where the proxy's key would be (None: no secret was read,
    or the key is there)."""
    from freezeframe.evidence.requests import typed_view

    key_path = data_dir / KEY_FILENAME
    key = load_or_create_key(key_path) if key_path.is_file() else None
    view, redacted = typed_view(
        method, url, tuple(headers), body, Redactor(key or secrets.token_bytes(KEY_BYTES))
    )
    return view, key_path if key is None and redacted else None


def explained_document(canonical: Canonical) -> dict[str, Any]:
    """``explain --json``: the key, the canonical form it comes from and what was stripped."""
    return {
        "key": canonical.key,
        "profile": canonical.profile,
        "body_kind": canonical.body_kind,
        "canonical": json.loads(canonical.form),
        "stripped": [asdict(s) for s in canonical.stripped],
        "warnings": list(canonical.warnings),
    }


def explained_lines(canonical: Canonical) -> Iterator[str]:
    """What ``explain`` prints below the key: the canonical form, what was stripped (one
    aligned line each) and the warnings."""
    stripped = canonical.stripped
    yield json.dumps(json.loads(canonical.form), indent=2, ensure_ascii=False)
    if not stripped:
        yield "nothing stripped"
    width = max((len(part.part) for part in stripped), default=0)
    rule_width = max((len(part.rule) for part in stripped), default=0)
    for part in stripped:
        yield f"stripped  {part.part.ljust(width)}  {part.rule.ljust(rule_width)}  {part.digest}"
    for warning in canonical.warnings:
        yield f"warning: {warning}"
