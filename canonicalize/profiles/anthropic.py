"""Anthropic's Messages API, and gateways that mount it under a prefix of their own.

Chosen for paths ending in `/v1/messages` or `/v1/messages/count_tokens` (whose fields are a
subset), on any host.

The `anthropic-version` and `anthropic-beta` headers join the key: they select the API's
behaviour, so the same body can get a different answer under another version or beta.
As in `openai`, only the DROP list acts and unknown fields stay in the key; the KEEP list is
there for the test that holds both against the SDK's request types.
"""

from .profile import Profile, top_level

# .venv/lib/python3.12/site-packages/anthropic/types/message_create_params.py
# (MessageCreateParamsBase, and `stream` from MessageCreateParamsStreaming); the beta-only
# fields from anthropic/types/beta/message_create_params.py; count_tokens takes a subset:
# anthropic/types/message_count_tokens_params.py and
# anthropic/types/beta/message_count_tokens_params.py
MESSAGES_KEEP = frozenset(
    {
        "messages",
        "model",
        "max_tokens",
        "system",
        "thinking",
        "tools",
        "tool_choice",
        "stop_sequences",
        "output_config",
        "speed",
        # Server-side state the answer builds on: a code-execution container, a held thread.
        "container",
        "thread",
        # A streamed answer differs from a whole one in every byte.
        "stream",
        # Beta: they change what the model sees or which model answers.
        "compaction",
        "context_management",
        "fallbacks",
        "mcp_servers",
        # Sampling parameters the API accepts though this SDK's types no longer list them.
        "temperature",
        "top_k",
        "top_p",
    }
)

MESSAGES_DROP = frozenset(
    {
        # `user_id`, an end-user identifier for Anthropic's abuse detection.
        "metadata",
        # Which capacity or region serves the request, not what it answers.
        "service_tier",
        "inference_geo",
        # Prompt caching is an optimization: a cached prefix answers the same.
        "cache_control",
        # Asks the response to explain a cache miss against an earlier message id.
        "diagnostics",
        # Who pays, and a billing credit minted for one retry after a refusal.
        "billing_policy",
        "fallback_credit_token",
    }
)

HEADER_PARAMS = {
    "betas": "anthropic-beta",
    "user_profile_id": "anthropic-user-profile-id",
    "workspace_id": "anthropic-workspace-id",
}
"""SDK parameters sent as headers, not body fields. Only `anthropic-beta` joins the key: the
user profile and workspace attribute and bill a request without changing its answer."""

MESSAGES = Profile(
    "anthropic.messages",
    top_level(MESSAGES_DROP),
    key_headers=frozenset({"anthropic-version", "anthropic-beta"}),
    token_list_headers=frozenset({"anthropic-beta"}),
)


def anthropic_profile(path: str) -> Profile | None:
    """The Messages profile when the path ends like the Messages API's, else None."""
    if path.endswith(("/v1/messages", "/v1/messages/count_tokens")):
        return MESSAGES
    return None
