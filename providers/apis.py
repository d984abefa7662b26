"""Which recorded requests are model calls, and the reader for each API.

The API is told by the path's end, as ``canonicalize`` tells it (its profiles), so a model
call here is one the key and the recorded metadata treat as one, on any host: OpenAI's and
Anthropic's own, Azure's deployments, and the servers that copy their endpoints; Bedrock
Runtime's and Gemini's (and Vertex AI's) model paths; Cohere's ``/v2/chat``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.canonicalize.profiles.anthropic import anthropic_profile
from freezeframe.canonicalize.profiles.bedrock import bedrock_profile
from freezeframe.canonicalize.profiles.cohere import cohere_profile
from freezeframe.canonicalize.profiles.gemini import gemini_profile
from freezeframe.canonicalize.profiles.openai import openai_profile
from freezeframe.providers import (
    anthropic_messages,
    bedrock_converse,
    bedrock_invoke,
    cohere_chat,
    gemini,
    openai_chat,
    openai_responses,
)
from freezeframe.providers.messages import Message, MessageMemo, Prompt
from freezeframe.providers.streams import Stream


@dataclass(frozen=True, slots=True)
class ApiReader:
    """How one API's requests, answers and streams are read."""

    provider: str
    api: str
    """The profile name, as in the recorded metadata's ``api``."""
    read_prompt: Callable[[dict[str, JsonValue], MessageMemo], Prompt]
    read_answer: Callable[[dict[str, JsonValue]], Message]
    """The answer's message, from the answer in its whole (not streamed) shape."""
    stream: Callable[[], Stream]


READERS = {
    reader.api: reader
    for reader in (
        ApiReader(
            "openai",
            openai_chat.API,
            openai_chat.read_prompt,
            openai_chat.read_answer,
            openai_chat.ChatStream,
        ),
        ApiReader(
            "openai",
            openai_responses.API,
            openai_responses.read_prompt,
            openai_responses.read_answer,
            openai_responses.ResponsesStream,
        ),
        ApiReader(
            "anthropic",
            anthropic_messages.API,
            anthropic_messages.read_prompt,
            anthropic_messages.read_answer,
            anthropic_messages.MessagesStream,
        ),
        ApiReader(
            "aws.bedrock",
            bedrock_converse.API,
            bedrock_converse.read_prompt,
            bedrock_converse.read_answer,
            bedrock_converse.ConverseStream,
        ),
        ApiReader(
            "aws.bedrock",
            bedrock_invoke.API,
            bedrock_invoke.read_prompt,
            bedrock_invoke.read_answer,
            bedrock_invoke.InvokeStream,
        ),
        ApiReader(
            "gcp.gemini",
            gemini.API,
            gemini.read_prompt,
            gemini.read_answer,
            gemini.GeminiStream,
        ),
        ApiReader(
            "cohere",
            cohere_chat.API,
            cohere_chat.read_prompt,
            cohere_chat.read_answer,
            cohere_chat.CohereStream,
        ),
    )
}
"""Chat Completions, Responses, Messages, Bedrock's Converse and InvokeModel, Gemini's
generateContent, Cohere's Chat v2; embeddings, legacy completions and token counting are not
conversations. ``provider`` is the API's owner; `canonicalize.providers.provider_of` tells who
served a given call (Azure for OpenAI's API, Vertex AI for Gemini's)."""


def api_of(method: str, path: str) -> ApiReader | None:
    """The reader for a request to ``path`` (its query string, if any, is ignored)."""
    if method.upper() != "POST":
        return None
    path = path.split("?", 1)[0]
    profile = (
        openai_profile(path)
        or anthropic_profile(path)
        or bedrock_profile(path)
        or gemini_profile(path)
        or cohere_profile(path)
    )
    if profile is None or path.endswith("/count_tokens"):
        return None
    return READERS.get(profile.name)
