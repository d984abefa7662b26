"""What a model call costs, from its recorded token counts: the estimate ``recheck --live``
shows before it spends anything, and what it spent as it goes (``--budget``).

The prices are LiteLLM's maintained table (``model_prices_and_context_window.json``, MIT),
cut to the chat, completion and Responses models of the providers freezeframe reads and
shipped as ``model_prices.json`` beside this module; ``scripts/model_prices.py`` writes it
again from a given litellm version, which the file records with the licence. Prices are per
token in US dollars: input, output, and where the table has them, prompt-cache reads and
writes (a call's cached tokens are priced at those, not at the full input price).

A recorded model name is matched against the table's names without their provider prefix
(``gemini/gemini-2.5-flash`` is ``gemini-2.5-flash``) and, for a name the table lacks, its
longest family in the table followed by ``-``, ``:`` or ``@`` (``gpt-4o-2099-01-01`` is
``gpt-4o``). A model with neither has no price: the estimate says so instead of guessing,
and ``--budget`` cannot be checked against it. Batch, priority, long-context tiers and
regional prices are not modelled.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

TABLE = "model_prices.json"
"""The price table's file, in this package."""

PREFERRED = (
    "openai",
    "anthropic",
    "gemini",
    "vertex_ai-language-models",
    "vertex_ai-anthropic_models",
    "bedrock_converse",
    "bedrock",
    "mistral",
    "xai",
    "deepseek",
    "cohere_chat",
    "groq",
    "azure",
)
"""Whose price a bare model name gets when several providers list it: the model's maker
first, resellers after (a provider not named here comes last)."""

_FAMILY_ENDS = ("-", ":", "@")
_REGIONS = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.")


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per token."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True)
class Tokens:
    input: int
    """Input tokens billed at the full input price (cached ones are counted apart)."""
    output: int
    cache_read: int = 0
    cache_write: int = 0


_INPUT = ("input_tokens", "prompt_tokens", "inputTokens", "promptTokenCount")
_OUTPUT = ("output_tokens", "completion_tokens", "outputTokens", "candidatesTokenCount")
_CACHED_WITHIN = (
    "prompt_tokens_details.cached_tokens",  # OpenAI Chat Completions
    "input_tokens_details.cached_tokens",  # OpenAI Responses
    "cachedContentTokenCount",  # Gemini
)
"""Cached input tokens that a provider counts inside its input total."""
_CACHE_READ = ("cache_read_input_tokens", "cacheReadInputTokens")
_CACHE_WRITE = ("cache_creation_input_tokens", "cacheWriteInputTokens")
"""Anthropic's and Bedrock Converse's cache counts, kept apart from their input total."""


def tokens_of(usage: Mapping[str, object] | None) -> Tokens | None:
    """The counts of a recorded answer's usage (any provider's names, ``*_details`` flattened
    as ``name.detail``), or None when it carries none."""
    if not usage:
        return None
    found_in, found_out = _count(usage, _INPUT), _count(usage, _OUTPUT)
    if found_in is None and found_out is None:
        return None
    within = _count(usage, _CACHED_WITHIN) or 0
    read = within + (_count(usage, _CACHE_READ) or 0)
    write = _count(usage, _CACHE_WRITE) or 0
    return Tokens(max(0, (found_in or 0) - within), found_out or 0, read, write)


def _count(usage: Mapping[str, object], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def table_version() -> str:
    """The litellm version the shipped prices were taken from."""
    return str(_document()["litellm_version"])


def price_for(model: str | None) -> Price | None:
    """The per-token price of ``model`` (see the module's docstring for the matching), or
    None when the table has no price for it."""
    if not model:
        return None
    name = model.lower().rpartition("/")[2]  # a Vertex or Bedrock path's last part
    for region in _REGIONS:
        name = name.removeprefix(region)
    prices = _by_name()
    if name in prices:
        return prices[name]
    families = [f for f in prices if name.startswith(f) and name[len(f)] in _FAMILY_ENDS]
    return prices[max(families, key=len)] if families else None


def price_of(model: str | None) -> tuple[float, float] | None:
    """The (input, output) price per million tokens of ``model``, or None."""
    price = price_for(model)
    if price is None:
        return None
    return (round(price.input * 1_000_000, 6), round(price.output * 1_000_000, 6))


def cost_of(model: str | None, tokens: Tokens) -> float | None:
    """US dollars for one call of ``model`` with these counts; None when it has no price.
    Cached tokens are priced at the cache prices, or the input price where the table has
    none."""
    price = price_for(model)
    if price is None:
        return None
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    return (
        tokens.input * price.input
        + tokens.output * price.output
        + tokens.cache_read * read
        + tokens.cache_write * write
    )


@functools.cache
def _document() -> dict[str, object]:
    text = resources.files(__package__).joinpath(TABLE).read_text("utf-8")
    document: dict[str, object] = json.loads(text)
    return document


@functools.cache
def _by_name() -> dict[str, Price]:
    """Every model of the table under its bare name (no provider prefix, lower case); where
    providers share a name, the PREFERRED one's price, then the entry with the shortest path
    (``bedrock/us-east-1/x`` is a region's price, ``x`` the list price)."""
    models = _document()["models"]
    assert isinstance(models, dict)
    rank = {provider: n for n, provider in enumerate(PREFERRED)}
    chosen: dict[str, tuple[tuple[int, int], Price]] = {}
    for key, entry in models.items():
        bare = key.lower().rpartition("/")[2]
        order = (rank.get(entry["litellm_provider"], len(rank)), key.count("/"))
        if bare in chosen and chosen[bare][0] <= order:
            continue
        price = Price(
            entry["input_cost_per_token"],
            entry.get("output_cost_per_token", 0.0),
            entry.get("cache_read_input_token_cost"),
            entry.get("cache_creation_input_token_cost"),
        )
        chosen[bare] = (order, price)
    return {bare: price for bare, (_, price) in chosen.items()}
