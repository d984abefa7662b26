"""Credentials known by name and by shape: the classifier, and every rule by its examples."""

from __future__ import annotations

import pytest
import re2

from freezeframe.storage.credentials import (
    RULES,
    Secret,
    load_rules,
    looks_like_credential,
    prefix_pattern,
    secret_name,
)
from freezeframe.storage.redaction import KEY_BYTES, Redactor

KEY = b"k" * KEY_BYTES

CREDENTIAL_NAMES = (
    "authorization",
    "Authorization",
    "Proxy-Authorization",
    "authorization_token",
    "x-api-key",
    "api-key",
    "api_key",
    "apiKey",
    "APIKey",
    "apikey",
    "xi-api-key",
    "x-goog-api-key",
    "Private-Token",
    "X-Auth-Key",
    "X-Auth-Token",
    "X-Vault-Token",
    "Ocp-Apim-Subscription-Key",
    "X-Subscription-Token",
    "X-Amz-Security-Token",
    "x-aws-ec2-metadata-token",
    "Helicone-Auth",
    "cf-access-client-secret",
    "Cookie",
    "Set-Cookie",
    "password",
    "passwd",
    "client_secret",
    "clientSecret",
    "aws_secret_access_key",
    "SecretAccessKey",
    "access_key",
    "accessKey",
    "private_key",
    "privateKey",
    "access_token",
    "refresh_token",
    "id_token",
    "session_token",
    "sessionToken",
    "bearer_token",
    "secret_key",
    "service_account_key",
    "credentials",
)

ORDINARY_NAMES = (
    "max_tokens",
    "max_completion_tokens",
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "cached_tokens",
    "token_count",
    "totalTokenCount",
    "promptTokenCount",
    "tokenizer",
    "tokens",
    "token_type",
    "expires_in",
    "refresh_token_expires_in",
    "pageToken",
    "nextPageToken",
    "next_page_token",
    "NextToken",
    "continuationToken",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-input-tokens-reset",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "www-authenticate",
    "sec-websocket-key",
    "key",
    "keys",
    "monkey",
    "idempotency-key",
    "signature",
    "sig",
    "design",
    "x-goog-api-client",
    "content-type",
    "secret_name",
)


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_name_that_means_a_credential_is_one(name: str) -> None:
    assert secret_name(name) is Secret.ALWAYS, name


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_a_count_a_cursor_or_a_word_alike_is_not(name: str) -> None:
    assert secret_name(name) is Secret.NO, name


def test_a_bare_token_or_secret_is_one_only_with_a_credentials_looks() -> None:
    assert secret_name("token") is Secret.IF_SHAPED
    assert secret_name("secret") is Secret.IF_SHAPED
    assert not looks_like_credential(b"Hello")
    assert not looks_like_credential(b"a sentence that is long")
    assert looks_like_credential(b"tok_9f8e7d6c5b4a39281706f5e4")


def test_a_few_short_names_are_credentials_only_in_a_query() -> None:
    assert secret_name("sig", query=True) is Secret.ALWAYS
    assert secret_name("X-Amz-Signature", query=True) is Secret.ALWAYS
    assert secret_name("key", query=True) is Secret.IF_SHAPED
    assert secret_name("token", query=True) is Secret.IF_SHAPED
    assert secret_name("password", query=True) is Secret.ALWAYS


def _compiled(pattern: str) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.id)
def test_every_rule_catches_its_examples_and_leaves_its_look_alikes(rule) -> None:  # type: ignore[no-untyped-def]
    compiled = _compiled(rule.pattern)
    assert rule.source.startswith("https://"), rule.id
    redactor = Redactor(KEY)
    for example in rule.examples:
        found = compiled.search(example)
        assert found is not None, (rule.id, example)
        secret = next(
            (found.group(g) for g in range(1, compiled.groups + 1) if found.start(g) >= 0),
            found.group(0),
        )
        assert len(secret) >= 16, (rule.id, example)
        body = f'{{"note": "configured with {example} today"}}'.encode()
        redacted = redactor.body(body)
        assert secret.encode() not in redacted, (rule.id, example)
        assert len(redacted) == len(body)
        assert secret not in redactor.text(f"error: {example}")
    for look_alike in rule.not_examples:
        assert compiled.search(look_alike) is None, (rule.id, look_alike)


def test_every_rule_has_one_capturing_group_at_most() -> None:
    for rule in RULES:
        assert _compiled(rule.pattern).groups <= 1, rule.id
    assert len({rule.id for rule in RULES}) == len(RULES)


def test_a_prefix_is_found_with_its_letters_json_escaped() -> None:
    pattern = _compiled(prefix_pattern("sk-") + "[a-z]{4}")
    for spelling in ("sk-abcd", "\\u0073k-abcd", "sk\\u002dabcd", "sk%2Dabcd"):
        assert pattern.search(spelling), spelling
    assert pattern.search("task-abcd") is None


def test_a_rule_without_examples_is_refused() -> None:
    with pytest.raises(ValueError, match="'x': no examples"):
        load_rules('[[rule]]\nid = "x"\ndescription = ""\nsource = ""\nregex = "a"\nexamples = []')
    with pytest.raises(ValueError, match="credential rule 1: no 'regex'"):
        load_rules('[[rule]]\nid = "x"\ndescription = ""\nsource = ""\nexamples = ["a"]')
