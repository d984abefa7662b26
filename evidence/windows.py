"""How much of the model's context window one call used, for the models whose window is known.

A small table of well-known model families, from the providers' model pages (OpenAI:
https://platform.openai.com/docs/models, Anthropic:
https://docs.anthropic.com/en/docs/about-claude/models). A model name matches a family when
it is the family's name or starts with it and a dash (``gpt-4o-2024-08-06`` is ``gpt-4o``),
the longest such family winning; a ``provider/`` prefix, as routers write names, is left
out, and so is a Bedrock model id's vendor (``anthropic.``, ``amazon.``, behind a
cross-region ``us.``/``eu.``/``apac.``/``global.``), so
``us.anthropic.claude-3-5-sonnet-20240620-v1:0`` is ``claude-3``. Any other model has no
known window, and nothing is guessed: an unknown model gives None, not a default.
Anthropic's 1M-token beta (``anthropic-beta: context-1m-...``) widens the window of the
request that asks for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

CONTEXT_WINDOWS: Mapping[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-instruct": 4_096,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    # Google (https://ai.google.dev/gemini-api/docs/models)
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    # Amazon (https://docs.aws.amazon.com/nova/latest/userguide/what-is-nova.html)
    "nova-pro": 300_000,
    "nova-lite": 300_000,
    "nova-micro": 128_000,
}
"""Tokens of context (prompt and answer together) by model family."""

_BEDROCK_VENDOR = re.compile(
    r"^(?:(?:us|eu|apac|global)\.)?(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek)\."
)

LONG_CONTEXT_BETA = "context-1m-"
LONG_CONTEXT_WINDOW = 1_000_000


@dataclass(frozen=True, slots=True)
class ContextUse:
    """One call's tokens against its model's context window."""

    window: int
    """Tokens the model's context holds."""
    family: str
    """The CONTEXT_WINDOWS entry that gave ``window`` (or the beta that widened it)."""
    input_tokens: int | None
    """The prompt as the model counted it, cached tokens included; None without usage."""
    output_tokens: int | None
    used: int | None
    """Input and output together."""
    share: float | None
    """``used`` over ``window``."""


def context_use(
    model: str | None, usage: Mapping[str, int], anthropic_beta: str | None
) -> ContextUse | None:
    """None when the model's window is not known."""
    found = _window(model)
    if found is None:
        return None
    family, window = found
    if anthropic_beta and family.startswith("claude-") and LONG_CONTEXT_BETA in anthropic_beta:
        family, window = f"{family} with the 1M-token beta", LONG_CONTEXT_WINDOW
    input_tokens, output_tokens = token_counts(usage)
    used = None if input_tokens is None else input_tokens + (output_tokens or 0)
    share = None if used is None else used / window
    return ContextUse(window, family, input_tokens, output_tokens, used, share)


def _window(model: str | None) -> tuple[str, int] | None:
    if not model:
        return None
    name = _BEDROCK_VENDOR.sub("", model.rsplit("/", 1)[-1].lower())
    matches = [f for f in CONTEXT_WINDOWS if name == f or name.startswith(f + "-")]
    if not matches:
        return None
    family = max(matches, key=len)
    return family, CONTEXT_WINDOWS[family]


def token_counts(usage: Mapping[str, int]) -> tuple[int | None, int | None]:
    """(input, output) tokens of a call's usage, whatever the provider names them; ``show``
    lists them."""
    output = _first(
        usage, "output_tokens", "completion_tokens", "outputTokens", "candidatesTokenCount"
    )
    return _input_tokens(usage), output


def _input_tokens(usage: Mapping[str, int]) -> int | None:
    """OpenAI counts cached tokens inside ``prompt_tokens``/``input_tokens``; Anthropic's
    ``input_tokens`` leaves out what it read from or wrote to its cache
    (anthropic/types/usage.py), so those are added back."""
    base = _first(usage, "input_tokens", "prompt_tokens", "inputTokens", "promptTokenCount")
    if base is None:
        return None
    cached = (
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cacheReadInputTokens",
        "cacheWriteInputTokens",
    )
    return base + sum(usage.get(name, 0) for name in cached)


def _first(usage: Mapping[str, int], *names: str) -> int | None:
    return next((usage[name] for name in names if name in usage), None)
