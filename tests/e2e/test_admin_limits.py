"""The admin port's limit on wrong tokens, against a real proxy (uvicorn in front, as users
run it): a guesser cannot dodge it by naming a new client address in ``X-Forwarded-For``
unless the user named the proxy that sends it, and wrong bearer tokens on ``/api/*`` count
with the login form's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.proxy import ProxyProcess

from freezeframe.proxy.admin.access import LOGIN_FAILURES

pytestmark = pytest.mark.e2e

TOKEN = "e2e-admin-token-4b1d8e6f2a"
GUESSES = 14
"""The red-team pass's count: four past the limit."""


def guarded(data_dir: Path, *args: str) -> Iterator[ProxyProcess]:
    proxy = ProxyProcess(data_dir, args=args, env={"FREEZEFRAME_ADMIN_TOKEN": TOKEN})
    try:
        yield proxy.start()
    finally:
        proxy.kill()


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ProxyProcess]:
    yield from guarded(tmp_path / "data")


def login_statuses(proxy: ProxyProcess, rotate: bool) -> list[int]:
    """Post GUESSES wrong tokens to /login, each from a new X-Forwarded-For if ``rotate``."""
    statuses = []
    with httpx.Client(base_url=proxy.admin_url, trust_env=False, timeout=10.0) as browser:
        page = browser.get("/login").text
        found = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert found is not None
        for n in range(GUESSES):
            spoof = {"x-forwarded-for": f"203.0.113.{n + 1}"} if rotate else {}
            answer = browser.post(
                "/login",
                data={"csrf_token": found.group(1), "token": f"guess-{n}"},
                headers=spoof,
            )
            statuses.append(answer.status_code)
    return statuses


def test_a_rotating_x_forwarded_for_does_not_reset_the_login_limit(
    proxy: ProxyProcess,
) -> None:
    statuses = login_statuses(proxy, rotate=True)
    assert statuses[:LOGIN_FAILURES] == [401] * LOGIN_FAILURES
    assert statuses[LOGIN_FAILURES:] == [429] * (GUESSES - LOGIN_FAILURES)


def test_a_named_trusted_proxy_has_its_x_forwarded_for_believed(tmp_path: Path) -> None:
    for proxy in guarded(tmp_path / "data", "--admin-trusted-proxy", "127.0.0.1"):
        # Each guess comes from another client as the trusted proxy names it: none is limited.
        assert login_statuses(proxy, rotate=True) == [401] * GUESSES


def test_wrong_bearer_tokens_are_limited_and_count_with_the_logins(
    proxy: ProxyProcess,
) -> None:
    for n in range(LOGIN_FAILURES):
        wrong = proxy.admin(
            "GET", "/api/mode", headers={"authorization": f"Bearer guess-{n}-0123456789"}
        )
        assert wrong.status_code == 401, n
    refused = proxy.admin("GET", "/api/cassettes", headers={"authorization": "Bearer nope"})
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    right = proxy.admin("GET", "/api/mode", headers={"authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 429, "while limited even the right token tells nothing"
    assert login_statuses(proxy, rotate=False)[0] == 429, "the login form shares the count"
    assert proxy.admin("GET", "/health").status_code == 200
