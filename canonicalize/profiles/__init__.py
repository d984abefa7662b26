"""Built-in knowledge of common APIs: which parts of their requests do not change the answer.

One module per kind of API; `select_profile` picks the one that applies to a request.
"""

from ..body import ReadBody
from .anthropic import anthropic_profile
from .bedrock import bedrock_profile
from .cohere import cohere_profile
from .gemini import gemini_profile
from .generic import generic_profile
from .mcp import MCP, MCP_BATCH, is_json_rpc_request
from .openai import openai_profile
from .profile import Profile
from .telemetry import telemetry_profile

__all__ = ["Profile", "select_profile"]


def select_profile(path: str, body: ReadBody) -> Profile:
    """Choose by body shape first, then by path, else generically by how the body was read.

    A JSON-RPC envelope is unmistakable wherever it is sent, so MCP wins over a path that
    merely ends like an OpenAI or Anthropic endpoint. Telemetry export comes next: its paths
    (`/v1/traces/ingest`, OTLP's `/v1/traces`) are no model API's.
    """
    if body.kind == "json" and is_json_rpc_request(body.value):
        return MCP_BATCH if isinstance(body.value, list) else MCP
    return (
        telemetry_profile(path)
        or openai_profile(path)
        or anthropic_profile(path)
        or bedrock_profile(path)
        or gemini_profile(path)
        or cohere_profile(path)
        or generic_profile(body.kind)
    )
