"""Credentials as SDKs and clouds really send them, for tests that push them through a proxy.

Each entry is one spelling: where it travels (a request header, a JSON member at some depth,
a form or multipart field, a query parameter) and under what name, with a value no key shape
matches, so only the name can give it away; plus every example of every shape rule
(storage/credential_rules.toml), which only its shape can give away.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from freezeframe.storage.credentials import RULES


def _value(place: str, name: str) -> str:
    """A value unique to its place and name, 32 hex digits: no key shape knows it."""
    return "v" + hashlib.sha256(f"{place}:{name}".encode()).hexdigest()[:31]


HEADER_NAMES: tuple[str, ...] = (
    # OpenAI, Azure OpenAI, Anthropic, Gemini, Mistral, Cohere, Groq, xAI
    "Authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "Ocp-Apim-Subscription-Key",
    # AWS SigV4 session tokens, instance metadata
    "X-Amz-Security-Token",
    "X-aws-ec2-metadata-token",
    # ElevenLabs, Brave search, Supabase, GitLab, Vault, Cloudflare
    "xi-api-key",
    "X-Subscription-Token",
    "apikey",
    "Private-Token",
    "Job-Token",
    "X-Vault-Token",
    "X-Auth-Key",
    "X-Auth-Token",
    "CF-Access-Client-Secret",
    "cf-aig-authorization",
    # gateways and observability proxies
    "Helicone-Auth",
    "X-Portkey-Api-Key",
    "LangSmith-Api-Key",
    "X-Litellm-Api-Key",
    "OpenRouter-Api-Key",
    # MCP connectors and agents' own services
    "X-MCP-Token",
    "X-Access-Token",
    "X-Session-Token",
    "X-CSRF-Token",
    "X-Client-Secret",
    "X-Secret-Key",
    "X-Private-Key",
    "X-Service-Key",
    "X-Master-Key",
    "X-Admin-Key",
    "X-Webhook-Secret",
    "X-Hub-Signature-Secret",
    "X-Password",
    "X-Api-Token",
    "Api-Token",
    "Auth-Token",
    "Access-Key",
    "Subscription-Key",
    "X-Functions-Key",
    "X-Goog-Api-Key-2",
    "Cookie",
)
"""Request headers whose whole value is a credential."""

JSON_MEMBERS: tuple[tuple[str, ...], ...] = (
    # OpenAI Responses: a remote MCP server's token, and its headers map
    ("tools", "0", "authorization"),
    ("tools", "0", "headers", "Authorization"),
    ("tools", "0", "headers", "X-Api-Key"),
    # Anthropic Messages: MCP connector
    ("mcp_servers", "0", "authorization_token"),
    # Bedrock / AWS credentials an agent passes on, and STS-like answers
    ("aws", "aws_access_key_id_value_secret"),
    ("aws", "aws_secret_access_key"),
    ("aws", "aws_session_token"),
    ("aws", "SecretAccessKey"),
    ("aws", "sessionToken"),
    # Vertex / Google service accounts
    ("service_account", "private_key"),
    ("service_account", "private_key_id_secret"),
    ("service_account", "client_secret"),
    # OAuth
    ("oauth", "access_token"),
    ("oauth", "refresh_token"),
    ("oauth", "id_token"),
    ("oauth", "clientSecret"),
    ("oauth", "code_verifier_secret"),
    # tool arguments and agent configuration
    ("config", "api_key"),
    ("config", "apiKey"),
    ("config", "openai_api_key"),
    ("config", "anthropicApiKey"),
    ("config", "mistral_api_key"),
    ("config", "cohere_api_key"),
    ("config", "groq_api_key"),
    ("config", "elevenlabs_api_key"),
    ("config", "supabase_service_role_key"),
    ("config", "gitlab_token"),
    ("config", "vault_token"),
    ("config", "cloudflare_api_token"),
    ("config", "stripe_secret_key"),
    ("config", "slack_bot_token"),
    ("config", "telegram_bot_token"),
    ("config", "hf_token"),
    ("config", "xai_api_key"),
    ("config", "password"),
    ("config", "db_password"),
    ("config", "passphrase"),
    ("config", "webhook_secret"),
    ("config", "access_key"),
    ("config", "subscription_key"),
    ("config", "credentials"),
    ("extra_headers", "x-api-key"),
    ("extra_headers", "Authorization"),
    ("default_headers", "api-key"),
    ("input", "0", "tool", "headers", "Private-Token"),
)
"""JSON members (by path) whose value is a credential, at every depth."""

FORM_FIELDS: tuple[str, ...] = (
    "password",
    "client_secret",
    "refresh_token",
    "access_token",
    "api_key",
    "subscription_key",
    "assertion_secret",
    "private_key",
)
MULTIPART_FIELDS: tuple[str, ...] = (
    "password",
    "api_key",
    "apiKey",
    "client_secret",
    "token_secret",
)
QUERY_PARAMS: tuple[str, ...] = (
    "token",
    "sig",
    "client_secret",
    "password",
    "api_key",
    "apikey",
    "access_token",
    "key",
    "subscription-key",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
    "auth_token",
)


@dataclass(frozen=True, slots=True)
class Spelling:
    place: str
    name: str
    value: str
    secret: str
    """What must never be stored: the value, or the part of a shape's example a rule takes."""


def _nested(path: tuple[str, ...], value: str, into: dict[str, Any]) -> None:
    node: Any = into
    for step, following in zip(path, path[1:], strict=False):
        if step.isdigit():
            while len(node) <= int(step):
                node.append({})
            node = node[int(step)]
        else:
            node = node.setdefault(step, [] if following.isdigit() else {})
    node[path[-1]] = value


def _secret_part(rule_pattern: str, example: str) -> str:
    """The longest run of key characters in what the rule takes from its example."""
    import re2

    options = re2.Options()
    options.log_errors = False
    found = re2.compile(rule_pattern, options=options).search(example)
    assert found is not None, example
    groups = [found.group(g) for g in range(1, found.re.groups + 1) if found.start(g) >= 0]
    taken = groups[0] if groups else found.group(0)
    return max(re.findall(r"[A-Za-z0-9_]+", taken), key=len)


def header_value(name: str) -> str:
    value = _value("header", name)
    if name.lower() in ("authorization", "cf-aig-authorization", "helicone-auth"):
        return f"Bearer {value}"
    if name.lower() == "cookie":
        return f"session={value}"
    return value


def corpus() -> list[Spelling]:
    spellings = [
        Spelling("header", name, header_value(name), _value("header", name))
        for name in HEADER_NAMES
    ]
    spellings += [
        Spelling(
            "json", ".".join(path), _value("json", ".".join(path)), _value("json", ".".join(path))
        )
        for path in JSON_MEMBERS
    ]
    for place, names in (
        ("form", FORM_FIELDS),
        ("multipart", MULTIPART_FIELDS),
        ("query", QUERY_PARAMS),
    ):
        spellings += [
            Spelling(place, name, _value(place, name), _value(place, name)) for name in names
        ]
    spellings += [
        Spelling("shape", rule.id, example, _secret_part(rule.pattern, example))
        for rule in RULES
        for example in rule.examples
    ]
    return spellings


def json_body(spellings: list[Spelling]) -> dict[str, Any]:
    """A Responses-style request holding every JSON member and every shape's example."""
    body: dict[str, Any] = {"model": "gpt-4.1", "max_output_tokens": 64}
    for spelling in spellings:
        if spelling.place == "json":
            _nested(tuple(spelling.name.split(".")), spelling.value, body)
    body["instructions"] = "Keys seen: " + " ; ".join(
        s.value for s in spellings if s.place == "shape"
    )
    return body
