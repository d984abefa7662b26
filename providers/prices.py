"""What a model call costs, from its recorded token counts: the estimate ``recheck --live``
shows before it spends anything.

Prices are the providers' public list prices per million tokens (input, output) in US
dollars, for the families named here, matched by the longest prefix of the recorded model
name (``gpt-4o-2024-08-06`` is ``gpt-4o``; ``gpt-4o-mini`` is its own). A model not listed
has no price: the estimate says so instead of guessing, and ``--budget`` cannot be checked
against it. Batch, cached-input and regional prices are not modelled: the estimate is an
upper bound for cached prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRICES: Mapping[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "anthropic.claude-3-5-sonnet": (3.00, 15.00),
    "anthropic.claude-sonnet-4": (3.00, 15.00),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-pro": (1.25, 10.00),
}
"""USD per million tokens, (input, output), by model family."""

_INPUT = ("input_tokens", "prompt_tokens", "inputTokens", "promptTokenCount")
_OUTPUT = ("output_tokens", "completion_tokens", "outputTokens", "candidatesTokenCount")


@dataclass(frozen=True, slots=True)
class Tokens:
    input: int
    output: int


def tokens_of(usage: Mapping[str, object] | None) -> Tokens | None:
    """The input and output counts of a recorded answer's usage (any provider's names), or
    None when it carries none."""
    if not usage:
        return None
    found_in, found_out = _count(usage, _INPUT), _count(usage, _OUTPUT)
    if found_in is None and found_out is None:
        return None
    return Tokens(found_in or 0, found_out or 0)


def _count(usage: Mapping[str, object], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def price_of(model: str | None) -> tuple[float, float] | None:
    """The (input, output) price per million tokens of ``model``'s family, or None."""
    if not model:
        return None
    name = model.lower().rpartition("/")[2]  # a Vertex or Bedrock path's last part
    for region in ("us.", "eu.", "apac."):
        name = name.removeprefix(region)
    families = [family for family in PRICES if name.startswith(family)]
    return PRICES[max(families, key=len)] if families else None


def cost_of(model: str | None, tokens: Tokens) -> float | None:
    """US dollars for one call of ``model`` with these counts; None when it has no price."""
    price = price_of(model)
    if price is None:
        return None
    return (tokens.input * price[0] + tokens.output * price[1]) / 1_000_000
