"""Who serves a model call, in OpenTelemetry's GenAI words (``gen_ai.provider.name``).

The API (the profile) says how a request is read; the provider is whose service answers it,
which the API alone does not tell: Azure OpenAI serves OpenAI's API. Names are the
conventions' (v1.37): ``openai``, ``anthropic``, ``aws.bedrock``, ``gcp.gemini``,
``gcp.vertex_ai``, ``azure.ai.openai``, ``cohere`` (its own Chat v2 API, and its
OpenAI-compatible one); and ``mcp`` for MCP servers.

Azure is told by its hosts (``*.openai.azure.com``, ``*.cognitiveservices.azure.com``,
``*.services.ai.azure.com``), its deployments path, or the ``api-version`` query that its
API requires and OpenAI's does not; ``/openai/v1/`` alone is not enough, since other
OpenAI-compatible services mount their API there too.
"""

from collections.abc import Sequence

from .profiles.bedrock import bedrock_call
from .profiles.gemini import gemini_call

AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
AZURE_DEPLOYMENTS = "/openai/deployments/"

_BY_PREFIX = {
    "openai": "openai",
    "anthropic": "anthropic",
    "mcp": "mcp",
    "bedrock": "aws.bedrock",
    "cohere": "cohere",
}

OPENAI_COMPATIBLE_HOSTS = {
    "api.mistral.ai": "mistral_ai",
    "api.groq.com": "groq",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
}
"""Services that serve OpenAI's API (Chat Completions) as their own, by their API host, in
the conventions' names: their SDKs (Mistral's, Groq's) call it there, and a call to them
was labelled ``openai``."""

MODEL_PROVIDERS = frozenset(
    {
        "openai",
        "anthropic",
        "aws.bedrock",
        "gcp.gemini",
        "gcp.vertex_ai",
        "azure.ai.openai",
        *OPENAI_COMPATIBLE_HOSTS.values(),
    }
)
"""Providers whose calls are model calls (MCP's are tool calls)."""


def provider_of(
    profile: str, host: str, path: str, query: Sequence[tuple[str, str]] = ()
) -> str | None:
    """The provider of a request that ``canonicalize`` gave ``profile``; None for the generic
    profiles. ``path`` is without its query, which ``query`` gives as pairs."""
    prefix = profile.split(".", 1)[0]
    if prefix == "gemini":
        call = gemini_call(path)
        return "gcp.vertex_ai" if call is not None and call[2] else "gcp.gemini"
    if prefix == "openai" and is_azure(host, path, query):
        return "azure.ai.openai"
    if prefix == "openai":
        return OPENAI_COMPATIBLE_HOSTS.get(host.lower().rstrip("."), "openai")
    return _BY_PREFIX.get(prefix)


def is_azure(host: str, path: str, query: Sequence[tuple[str, str]]) -> bool:
    if host.lower().rstrip(".").endswith(AZURE_HOSTS) or path.startswith(AZURE_DEPLOYMENTS):
        return True
    return any(name == "api-version" for name, _ in query)


def azure_deployment(path: str) -> str | None:
    """The deployment an Azure deployments path names: the model asked for."""
    if not path.startswith(AZURE_DEPLOYMENTS):
        return None
    name = path[len(AZURE_DEPLOYMENTS) :].split("/", 1)[0]
    return name or None


def model_in_path(path: str) -> str | None:
    """The model a request asks for where its path names it, which wins over its body's:
    Bedrock's model id (decoded), Gemini's model, an Azure deployment."""
    bedrock = bedrock_call(path)
    if bedrock is not None:
        return bedrock[0]
    gemini = gemini_call(path)
    if gemini is not None:
        return gemini[0]
    return azure_deployment(path)
