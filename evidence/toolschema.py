"""Tool-call arguments checked against the JSON Schema the request offered for that tool.

A model that invents an argument, leaves a required one out or writes a string where the
schema wants an integer makes the tool fail, or worse, do the wrong thing. The check is JSON
Schema's own (the ``jsonschema`` library, with the draft the schema names and 2020-12
otherwise), and each violation says which keyword it broke: ``type``, ``required``,
``additionalProperties`` (an unknown field where the schema forbids them), ``enum``,
``pattern``, ``minimum``... A schema that is not valid JSON Schema checks nothing: the fault
is the tool's, not the model's.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from freezeframe.providers.messages import FUNCTION, Tool, ToolCall

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

VALIDATORS = 256
"""Tool schemas whose validators are kept, checked once each."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One tool call's arguments breaking one rule of the tool's schema."""

    tool: str
    rule: str
    """The JSON Schema keyword broken (``type``, ``required``...), or ``json`` when the
    arguments are not JSON at all."""
    path: str
    """Where in the arguments, as a JSONPath (``$`` is the arguments themselves)."""
    expected: str
    """What the rule asked for, without the value the model wrote: ``integer``,
    ``'order_id'``, one of the enum's values... Empty when the rule says it alone."""
    message: str
    """The validator's own sentence, for people (it may quote the value written)."""
    call: int
    """The call's place among the answer's tool calls."""

    @property
    def summary(self) -> str:
        """One stable line: the same for every call that broke the rule the same way."""
        expected = f" ({self.expected})" if self.expected else ""
        return f"{self.tool} {self.path}: {self.rule}{expected}"


def violations(calls: Iterable[ToolCall], tools: Iterable[Tool]) -> Iterator[Violation]:
    """Every rule each function call breaks, in call order, of the tools that have a schema."""
    schemas = {t.name: t.parameters for t in tools if t.kind == FUNCTION and t.parameters}
    for index, call in enumerate(calls):
        schema = schemas.get(call.name)
        if call.kind != FUNCTION or not isinstance(schema, dict):
            continue
        if call.value is None and call.arguments.strip() not in {"", "null"}:
            yield Violation(call.name, "json", "$", "", "the arguments are not JSON", index)
            continue
        yield from _check(call, schema, index)


def _check(call: ToolCall, schema: Mapping[str, object], index: int) -> Iterator[Violation]:
    value = {} if call.value is None else call.value
    validator = _validator(json.dumps(schema, sort_keys=True, default=str))
    if validator is None:
        return
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    for error in errors:
        yield Violation(
            call.name,
            str(error.validator),
            _path(error),
            _expected(error),
            error.message,
            index,
        )


@functools.lru_cache(maxsize=VALIDATORS)
def _validator(schema: str) -> Any:
    """The validator of a schema (as JSON text), checked once: an agent offers the same few
    tools with every call, and checking a schema costs far more than validating against it.
    None for a schema that is not valid JSON Schema."""
    # Imported at the first schema to check, not with this module: the recorder and the
    # admin API import it at every start, and jsonschema (with its metaschemas) was 30 ms
    # of CPU of a replay's start that checks no tool call (#30).
    import jsonschema
    from jsonschema.exceptions import SchemaError

    found = json.loads(schema)
    cls = jsonschema.validators.validator_for(found, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(found)
    except SchemaError:
        return None
    return cls(found)


def _path(error: ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _expected(error: ValidationError) -> str:
    rule, wanted = error.validator, error.validator_value
    if rule == "required":
        # The message names the missing property first: "'x' is a required property".
        return str(error.message).split(" is a required property", 1)[0]
    if rule in {"type", "pattern", "format", "const"}:
        return str(wanted)
    if rule == "enum" and isinstance(wanted, list):
        return "one of " + ", ".join(repr(v) for v in wanted[:8])
    if rule in {"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}:
        return f"{rule} {wanted}"
    return ""
