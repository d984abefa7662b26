"""providers.prices: the shipped LiteLLM table read as it is, cached tokens at cache prices,
and a model the table lacks left unpriced rather than guessed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freezeframe.providers.prices import Tokens, cost_of, price_of, table_version, tokens_of

TABLE = json.loads((Path(__file__).parents[2] / "providers" / "model_prices.json").read_text())


def listed(name: str) -> dict[str, float]:
    entry: dict[str, float] = TABLE["models"][name]
    return entry


def test_the_table_records_its_source_version_and_licence() -> None:
    assert table_version() == TABLE["litellm_version"]
    assert "MIT License" in TABLE["licence"] and "Berri AI" in TABLE["licence"]


@pytest.mark.parametrize(
    ("recorded", "entry"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2099-01-01", "gpt-4o-mini"),  # its family, not gpt-4o's
        ("gpt-4o-2099-01-01", "gpt-4o"),
        (
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
        ),
        (
            "projects/p/locations/l/publishers/google/models/gemini-2.5-flash",
            "gemini/gemini-2.5-flash",
        ),
    ],
)
def test_a_recorded_model_gets_its_table_price(recorded: str, entry: str) -> None:
    price = listed(entry)
    per_million = (price["input_cost_per_token"] * 1e6, price["output_cost_per_token"] * 1e6)
    assert price_of(recorded) == pytest.approx(per_million)


@pytest.mark.parametrize("model", ["desk-llm-7b", "gpt-4ox", None, ""])
def test_a_model_the_table_lacks_has_no_price(model: str | None) -> None:
    assert price_of(model) is None
    assert cost_of(model, Tokens(1000, 100)) is None


def test_cached_prompt_tokens_are_priced_at_the_cache_prices() -> None:
    # OpenAI counts cached tokens inside prompt_tokens; Anthropic apart from input_tokens.
    openai = {"prompt_tokens": 1000, "completion_tokens": 100}
    openai["prompt_tokens_details.cached_tokens"] = 800
    assert tokens_of(openai) == Tokens(200, 100, 800, 0)
    anthropic = tokens_of(
        {
            "input_tokens": 200,
            "output_tokens": 100,
            "cache_read_input_tokens": 800,
            "cache_creation_input_tokens": 50,
        }
    )
    assert anthropic == Tokens(200, 100, 800, 50)
    price = listed("claude-sonnet-4-5")
    assert cost_of("claude-sonnet-4-5", anthropic) == pytest.approx(
        200 * price["input_cost_per_token"]
        + 100 * price["output_cost_per_token"]
        + 800 * price["cache_read_input_token_cost"]
        + 50 * price["cache_creation_input_token_cost"]
    )
    assert tokens_of({}) is None and tokens_of({"total_tokens": 5}) is None
