"""Write providers/model_prices.json, the price table ``recheck --live`` estimates with, from
LiteLLM's maintained ``model_prices_and_context_window.json`` (MIT, Berri AI).

The litellm wheel ships that file as ``litellm/model_prices_and_context_window_backup.json``;
this script takes it from a given litellm version (downloaded with ``pip download litellm==V
--no-deps``, or a wheel already at hand with ``--wheel``) and keeps the subset freezeframe
reads: the chat, completion and Responses models of the providers whose wire formats it
recognises, with their per-token input, output and prompt-cache prices under LiteLLM's own
field names, so any entry can be checked against the source. The version and the licence go
into the file with the table.

    python scripts/model_prices.py 1.110.2
    python scripts/model_prices.py 1.110.2 --wheel /tmp/litellm/litellm-1.110.2-...whl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

TABLE = Path(__file__).parents[1] / "providers" / "model_prices.json"
SOURCE = "litellm/model_prices_and_context_window_backup.json"

PROVIDERS = frozenset(
    {
        "openai",
        "text-completion-openai",
        "anthropic",
        "azure",
        "azure_ai",
        "bedrock",
        "bedrock_converse",
        "gemini",
        "vertex_ai",
        "vertex_ai-language-models",
        "vertex_ai-anthropic_models",
        "vertex_ai-mistral_models",
        "vertex_ai-llama_models",
        "vertex_ai-deepseek_models",
        "mistral",
        "groq",
        "cohere",
        "cohere_chat",
        "xai",
        "deepseek",
    }
)
"""LiteLLM's ``litellm_provider`` values of the APIs providers/ reads (and the OpenAI-compatible
hosts agents commonly point the OpenAI SDK at)."""
MODES = frozenset({"chat", "completion", "responses"})
FIELDS = (
    "litellm_provider",
    "mode",
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)


def subset(prices: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries freezeframe prices with, each cut to FIELDS, sorted by name."""
    kept = {}
    for name, entry in sorted(prices.items()):
        if not isinstance(entry, dict) or entry.get("litellm_provider") not in PROVIDERS:
            continue
        if entry.get("mode") not in MODES or "input_cost_per_token" not in entry:
            continue
        kept[name] = {field: entry[field] for field in FIELDS if field in entry}
    return kept


def from_wheel(wheel: Path) -> tuple[dict[str, Any], str]:
    """The price map and the licence text inside a litellm wheel."""
    with zipfile.ZipFile(wheel) as opened:
        prices = json.loads(opened.read(SOURCE))
        licence = next(n for n in opened.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
        return prices, opened.read(licence).decode()


def download(version: str, into: Path) -> Path:
    """The litellm wheel of ``version``, fetched from the package index with pip."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"litellm=={version}", "--no-deps", "-q"]
        + ["-d", str(into)],
        check=True,
    )
    return next(into.glob(f"litellm-{version}-*.whl"))


def layout(document: dict[str, Any]) -> str:
    """The file's text: one model a line, so that a new version's diff reads price by price."""
    head = {name: value for name, value in document.items() if name != "models"}
    lines = [f" {json.dumps(name)}: {json.dumps(value)}," for name, value in head.items()]
    models = [f"  {json.dumps(n)}: {json.dumps(e)}" for n, e in document["models"].items()]
    return "{\n" + "\n".join(lines) + '\n "models": {\n' + ",\n".join(models) + "\n }\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the litellm version to take the prices from")
    parser.add_argument("--wheel", type=Path, help="that version's wheel, already downloaded")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        wheel = args.wheel or download(args.version, Path(scratch))
        prices, licence = from_wheel(wheel)
    models = subset(prices)
    document = {
        "source": f"LiteLLM {SOURCE.rpartition('/')[2]} in litellm {args.version}",
        "litellm_version": args.version,
        "units": "US dollars per token",
        "generated_by": "scripts/model_prices.py",
        "licence": licence.strip(),
        "models": models,
    }
    TABLE.write_text(layout(document))
    sys.stdout.write(f"wrote {len(models)} models from litellm {args.version} to {TABLE}\n")


if __name__ == "__main__":
    main()
