"""The variable parts of a URL or an error message, masked, so that one failure reads the same
every time it happens.

Two rate-limit errors that differ only in the tokens used and the seconds to wait, or two
calls of one endpoint that differ only in the order id, are one failure: a person grouping
failures by hand would not tell them apart, and neither does a signature. What is masked:
UUIDs, long hexadecimal strings (hashes, trace ids), tokens mixing letters and digits that
are long enough to be ids (``org-4fQx81Ka``, ``req_7d9c1a``), and numbers, also those that end
a short name (``ord_500`` is ``ord_{n}``). What is kept: words, punctuation, and model names
(``gpt-4o``, ``gpt-4.1``, ``claude-3-5-sonnet-20241022``, ``o3-mini``, ``gemini-2.5-pro``,
``us.anthropic.claude-sonnet-4-20250514-v1:0``): a model's name says which model failed, the
same on every run, and masked it read ``gpt-{n}o`` or ``{id}``. A model name is a known
family's name (MODEL_FAMILIES) followed by dash- or dot-joined parts. The rules are fixed;
changing them changes signatures, so it needs a new SIGNATURE_VERSION (evidence.signatures).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MODEL_FAMILIES = (
    "gpt", "chatgpt", "o1", "o3", "o4", "claude", "gemini", "gemma", "llama", "codellama",
    "mistral", "mixtral", "ministral", "codestral", "pixtral", "magistral", "devstral",
    "open-mistral", "open-mixtral", "command", "c4ai", "embed", "rerank", "qwen", "qwq",
    "deepseek", "phi", "grok", "sonar", "nova", "titan", "jamba", "kimi", "glm", "text-embedding",
    "dall-e", "whisper", "tts",
)  # fmt: skip
"""How the model names kept whole in a signature begin (OpenAI, Anthropic, Google, Meta,
Mistral, Cohere, Qwen, DeepSeek, Microsoft, xAI, Perplexity, Amazon, AI21, Moonshot, Zhipu)."""

_MODEL = re.compile(
    r"(?<![A-Za-z0-9_.\-])"
    r"((?:(?:us|eu|apac|global)\.)?(?:[a-z0-9]+\.)?"  # a Bedrock id's region and vendor
    rf"(?:{'|'.join(map(re.escape, MODEL_FAMILIES))})"
    r"(?:[-.][A-Za-z0-9]+)*(?::\d+)?)"  # gpt-4o-2024-08-06, gemini-2.5-pro, ...-v1:0
    r"(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
"""A model's name, in the one group ``split`` keeps."""

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?<![A-Za-z0-9])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}(?![A-Za-z0-9])")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9.{])\d+(?:[.,]\d+)*(?![0-9])")
_SPACES = re.compile(r"\s+")
ID_MIN = 8
"""Characters a letters-and-digits token needs before it is taken for an id."""
MESSAGE_MAX = 160
"""Characters of a masked message a signature keeps: enough to tell errors apart."""


def mask_text(text: str) -> str:
    """``text`` with ids, hashes and numbers masked, model names kept, whitespace collapsed,
    and cut to MESSAGE_MAX characters."""
    pieces = _MODEL.split(text)  # model names at the odd places
    masked = "".join(piece if n % 2 else _mask_piece(piece) for n, piece in enumerate(pieces))
    masked = _SPACES.sub(" ", masked).strip()
    return masked if len(masked) <= MESSAGE_MAX else masked[: MESSAGE_MAX - 1] + "…"


def _mask_piece(text: str) -> str:
    masked = _UUID.sub("{id}", text)
    masked = _HEX.sub("{id}", masked)
    masked = _TOKEN.sub(_mask_token, masked)
    return _NUMBER.sub("{n}", masked)


def _mask_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if _is_id(token):
        return "{id}"
    return token


def _is_id(token: str) -> bool:
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    return has_digit and has_alpha and len(token) >= ID_MIN and not token.startswith("{")


def path_template(path: str) -> str:
    """The path (its query string left out) with each segment that names one thing (a
    number, a UUID, a hash, an id of letters and digits) replaced by ``{id}``:
    ``/orders/8812/items`` is ``/orders/{id}/items``."""
    segments = path.split("?", 1)[0].split("/")
    return "/".join(_segment(segment) for segment in segments)


def _segment(segment: str) -> str:
    if not segment or _MODEL.fullmatch(unquote(segment).partition(":")[0]):
        return segment  # a model's (Gemini's ``gemini-2.5-pro:generateContent``, Bedrock's)
    if segment.isdigit() or _UUID.fullmatch(segment) or _HEX.fullmatch(segment):
        return "{id}"
    if _is_id(segment) or (any(c.isdigit() for c in segment) and len(segment) >= ID_MIN):
        return "{id}"
    return segment
