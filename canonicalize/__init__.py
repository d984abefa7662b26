"""Turn an HTTP request into a replay key, and explain why two requests' keys differ.

Pure by design: only the standard library and blake3, no clock and no I/O (except that
`load_rules` reads the file it is given), so the same request and options give the same key
in every process and every version with the same SCHEME_VERSION.
"""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

from .diff import differences, nearest, said
from .facts import (
    FACT_NAMES,
    FACTS_BODY_LIMIT,
    FactValue,
    ResponseView,
    answer_facts,
    facts_of,
    sse_events,
)
from .key import SCHEME_VERSION, canonicalize
from .model import (
    BodyDigest,
    Canonical,
    Difference,
    DifferenceLike,
    FormPart,
    KeyConfig,
    RequestView,
    Stripped,
)
from .rules import Route, Rule, RulesError, RuleSet, Substitution, load_rules, parse_rules
from .volatile import DEFAULT_VOLATILE_FIELDS

__all__ = [
    "DEFAULT_VOLATILE_FIELDS",
    "FACTS_BODY_LIMIT",
    "FACT_NAMES",
    "SCHEME_VERSION",
    "BodyDigest",
    "Canonical",
    "Difference",
    "DifferenceLike",
    "FactValue",
    "FormPart",
    "KeyConfig",
    "RequestView",
    "ResponseView",
    "Route",
    "Rule",
    "RuleSet",
    "RulesError",
    "Stripped",
    "Substitution",
    "answer_facts",
    "canonicalize",
    "differences",
    "facts_of",
    "load_rules",
    "nearest",
    "said",
    "parse_rules",
    "sse_events",
]
