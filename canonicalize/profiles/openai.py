"""OpenAI's APIs, and every server that copies them.

Covers Chat Completions, Responses, Embeddings and legacy Completions, chosen by the end of
the path alone, on any host: OpenAI-compatible servers mount the same endpoints under their
own prefixes (`/openai/v1/…`, `/api/v1/…`, `/v1beta/openai/…`), and Azure OpenAI under
`/openai/deployments/<deployment>/…`. There the deployment is part of the path and
`api-version` part of the query, and both stay in the key as every path and query do. The
price of matching by path alone is that an unrelated API whose path ends the same way loses
the few fields listed below from its key.

Each endpoint lists what it keeps and what it drops. Only the DROP list acts (see `Profile`):
a field in neither list stays in the key. The KEEP list is written out so that a test can hold
both lists against the SDK's own request types and fail when a new SDK field has been decided
by neither.
"""

from .profile import Profile, top_level

_END_USER = frozenset({"user", "safety_identifier"})
"""Who the end user is, for OpenAI's abuse monitoring; the answer does not depend on it."""

_BOOKKEEPING = frozenset({"metadata", "store"})
"""Tags for the dashboard, and whether OpenAI keeps a copy for evals and distillation."""

_SERVING = frozenset({"service_tier"})
"""Which capacity serves the request (latency and price), not what it answers."""

_PROMPT_CACHE = frozenset({"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options"})
"""How the prompt cache is routed and how long it lives; a cached prefix answers the same."""

_OUTPUT_STREAM = frozenset({"stream", "stream_options"})
"""Kept: a streamed answer, and one with a usage chunk, differ from others in every byte."""

# .venv/lib/python3.12/site-packages/openai/types/chat/completion_create_params.py
# (CompletionCreateParamsBase, and `stream` from CompletionCreateParamsStreaming)
CHAT_COMPLETIONS_KEEP = _OUTPUT_STREAM | {
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "modalities",
    "moderation",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "reasoning_effort",
    "response_format",
    "seed",
    "stop",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "verbosity",
    "web_search_options",
}
CHAT_COMPLETIONS_DROP = _END_USER | _BOOKKEEPING | _SERVING | _PROMPT_CACHE

# .venv/lib/python3.12/site-packages/openai/types/responses/response_create_params.py
# (ResponseCreateParamsBase, and `stream` from ResponseCreateParamsStreaming)
RESPONSES_KEEP = _OUTPUT_STREAM | {
    "input",
    "instructions",
    "model",
    "access_programs",
    "background",
    "background_options",
    "context_management",
    "conversation",
    "image",
    "include",
    "max_output_tokens",
    "max_tool_calls",
    "moderation",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "reasoning",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
}
RESPONSES_DROP = _END_USER | _BOOKKEEPING | _SERVING | _PROMPT_CACHE

# .venv/lib/python3.12/site-packages/openai/types/embedding_create_params.py
# (EmbeddingCreateParams)
EMBEDDINGS_KEEP = frozenset({"input", "model", "dimensions", "encoding_format"})
EMBEDDINGS_DROP = frozenset({"user"})

# .venv/lib/python3.12/site-packages/openai/types/completion_create_params.py
# (CompletionCreateParamsBase, and `stream` from CompletionCreateParamsStreaming)
COMPLETIONS_KEEP = _OUTPUT_STREAM | {
    "model",
    "prompt",
    "best_of",
    "echo",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "presence_penalty",
    "seed",
    "stop",
    "suffix",
    "temperature",
    "top_p",
}
COMPLETIONS_DROP = frozenset({"user"})

# The Realtime API's WebSocket (GET …/realtime?model=…, the upgrade request): its body is
# empty and its query names the model, so nothing is dropped; the session's key is the
# client's events (canonicalize.realtime). Named so its metadata says which API it is.
REALTIME = Profile("openai.realtime")

CHAT_COMPLETIONS = Profile("openai.chat-completions", top_level(CHAT_COMPLETIONS_DROP))
RESPONSES = Profile("openai.responses", top_level(RESPONSES_DROP))
EMBEDDINGS = Profile("openai.embeddings", top_level(EMBEDDINGS_DROP))
COMPLETIONS = Profile("openai.completions", top_level(COMPLETIONS_DROP))

_BY_PATH_END = (
    ("/chat/completions", CHAT_COMPLETIONS),
    ("/completions", COMPLETIONS),
    ("/responses", RESPONSES),
    ("/embeddings", EMBEDDINGS),
    ("/realtime", REALTIME),
)
"""Checked in order, so `/chat/completions` is not taken for legacy `/completions`."""


def openai_profile(path: str) -> Profile | None:
    """The endpoint's profile when the path ends like one of OpenAI's, else None."""
    for ending, profile in _BY_PATH_END:
        if path.endswith(ending):
            return profile
    return None
