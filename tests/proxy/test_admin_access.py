"""The admin port's door, in-process (the admin app over a real SQLite store): with a token,
nothing but /health and /ca.pem answers a stranger; scripts get in with a bearer header and
browsers through the login form; a Host that is not the port's is refused before any route."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.admin.access import (
    LOGIN_FAILURES,
    LOGIN_WINDOW,
    SESSION_COOKIE,
    LoginAttempts,
)
from freezeframe.proxy.admin.guard import CSRF_COOKIE
from freezeframe.proxy.settings import CA_FILENAME, Address, Settings, build
from freezeframe.storage import open_store

TOKEN = "s3cret-admin-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}
ADMIN = "0.0.0.0:8081"
PAGE = {"accept": "text/html,application/xhtml+xml"}
CERT = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def app_client(data_dir: Path, token: str | None, host: str = "freezeframe:8081") -> TestClient:
    store = open_store(f"sqlite:///{data_dir / 'freezeframe.db'}")
    settings = Settings(
        data_dir=data_dir,
        admin=Address.parse(ADMIN, "admin"),
        admin_token=token,
        admin_hosts=("freezeframe",),
    )
    app = create_app(store, RuntimeState(Mode.REPLAY, "bug-8821"), settings)
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    (tmp_path / CA_FILENAME).write_bytes(CERT)
    return tmp_path


@pytest.fixture
def client(data_dir: Path) -> Iterator[TestClient]:
    with app_client(data_dir, TOKEN) as client:
        yield client


def test_a_stranger_reads_only_health_and_the_ca(client: TestClient) -> None:
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "admin_token": "required"}
    assert client.get("/ca.pem").content == CERT
    for path in ("/", "/api/mode", "/api/cassettes", "/metrics", "/cassettes.json"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "Authorization: Bearer" in refused.json()["error"]
        assert refused.headers["www-authenticate"] == 'Bearer realm="freezeframe"'
    assert client.put("/api/mode", json={"mode": "record"}).status_code == 401
    assert client.get("/api/mode", headers=BEARER).json()["mode"] == "replay"


def test_a_script_with_the_token_gets_everything_and_a_wrong_one_nothing(
    client: TestClient,
) -> None:
    assert client.get("/health", headers=BEARER).json()["data_dir"]
    assert client.get("/api/cassettes", headers=BEARER).json() == []
    assert client.get("/metrics", headers=BEARER).status_code == 200
    switched = client.put("/api/mode", json={"mode": "record"}, headers=BEARER)
    assert switched.status_code == 200 and switched.json()["mode"] == "record"
    for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer"):
        assert client.get("/api/mode", headers={"authorization": wrong}).status_code == 401
    assert "data_dir" not in client.get("/health", headers={"authorization": "Bearer no"}).json()


def csrf_of(page: str) -> str:
    """The CSRF token a form page carries."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, "the form carries a CSRF token"
    return found.group(1)


def test_a_browser_signs_in_with_a_form_and_gets_a_session_not_the_token(
    client: TestClient,
) -> None:
    sent = client.get("/cassettes?status=429", headers=PAGE)
    assert sent.status_code == 303
    assert sent.headers["location"] == "/login?next=%2Fcassettes%3Fstatus%3D429"
    form = client.get(sent.headers["location"])
    assert form.status_code == 200 and 'name="token"' in form.text
    assert "mode" not in re.sub(r"<form.*</form>", "", form.text, flags=re.S).lower()
    csrf = csrf_of(form.text)
    same_site = {"origin": "http://freezeframe:8081", "sec-fetch-site": "same-origin"}
    fields = {"csrf_token": csrf, "next": "/cassettes?status=429"}

    wrong = client.post("/login", data={**fields, "token": "guess"}, headers=same_site)
    assert wrong.status_code == 401 and "not the admin token of this proxy" in wrong.text
    assert SESSION_COOKIE not in client.cookies
    no_csrf = client.post("/login", data={"token": TOKEN}, headers=same_site)
    assert no_csrf.status_code == 403 and SESSION_COOKIE not in client.cookies

    signed_in = client.post("/login", data={**fields, "token": TOKEN}, headers=same_site)
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/cassettes?status=429"
    cookie = signed_in.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert TOKEN not in cookie
    page = client.get("/cassettes", headers=PAGE)
    assert page.status_code == 200 and "Sign out" in page.text
    assert client.get("/api/mode").json()["mode"] == "replay"

    # Signed in, a cross-site request still may not change anything (guard's rules) ...
    cross = client.put("/api/mode", json={"mode": "record"}, headers={"origin": "http://x.test"})
    assert cross.status_code == 403
    # ... while the case file's own script, with its CSRF token, may.
    own = client.put(
        "/api/mode",
        json={"mode": "record"},
        headers={**same_site, "x-csrf-token": client.cookies[CSRF_COOKIE]},
    )
    assert own.status_code == 200

    signed_out = client.post("/logout", data={"csrf_token": csrf}, headers=same_site)
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/login"
    assert client.get("/api/mode").status_code == 401


def test_a_stolen_or_stale_session_id_opens_nothing(client: TestClient, data_dir: Path) -> None:
    stolen = client.get("/api/mode", headers={"cookie": f"{SESSION_COOKIE}={TOKEN}"})
    assert stolen.status_code == 401  # the token itself is not a session
    form = client.get("/login")
    csrf = csrf_of(form.text)
    client.post("/login", data={"csrf_token": csrf, "token": TOKEN})
    sid = client.cookies[SESSION_COOKIE]
    with app_client(data_dir, TOKEN) as restarted:  # a new process knows no sessions
        restarted.cookies.set(SESSION_COOKIE, sid)
        assert restarted.get("/api/mode").status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example"])
def test_signing_in_never_sends_the_browser_to_another_site(
    client: TestClient, target: str
) -> None:
    form = client.get("/login")
    csrf = csrf_of(form.text)
    answer = client.post("/login", data={"csrf_token": csrf, "token": TOKEN, "next": target})
    assert answer.headers["location"] == "/cassettes"


def test_only_the_ports_own_names_are_answered(data_dir: Path) -> None:
    """A wildcard bind answers the loopback names, the --admin-host names, whatever the port
    in front of it (a docker mapping); a rebound name is refused before any route."""
    for host in ("freezeframe:8081", "FREEZEFRAME:9000", "127.0.0.1:18081", "localhost", "[::1]:1"):
        with app_client(data_dir, TOKEN, host) as client:
            assert client.get("/api/mode", headers=BEARER).status_code == 200, host
    for host in ("evil.example:8081", "freezeframe.evil.example", "127.0.0.2:8081", ""):
        with app_client(data_dir, TOKEN, host) as client:
            refused = client.get("/api/cassettes", headers=BEARER)
            assert refused.status_code == 421, host
            assert "allow it with --admin-host" in refused.json()["error"]
            assert "\n" not in refused.json()["error"]
            # Probes may use any name; under a strange one /health tells the status only.
            assert client.get("/health", headers=BEARER).json()["status"] == "ok"
            assert "data_dir" not in client.get("/health", headers=BEARER).json()
            assert client.get("/ca.pem").content == CERT


def test_without_a_token_a_loopback_port_is_open_to_its_own_names_only(data_dir: Path) -> None:
    store = open_store(f"sqlite:///{data_dir / 'freezeframe.db'}")
    settings = Settings(data_dir=data_dir, admin=Address.parse("127.0.0.1:8081", "admin"))
    app = create_app(store, RuntimeState(Mode.REPLAY, "bug-8821"), settings)
    with TestClient(app, base_url="http://localhost:8081", follow_redirects=False) as client:
        assert client.get("/api/mode").status_code == 200
        assert "data_dir" in client.get("/health").json()
        assert client.get("/login", headers=PAGE).headers["location"] == "/cassettes"
        rebound = client.get("/api/cassettes", headers={"host": "attacker.example:8081"})
        assert rebound.status_code == 421
        assert "data_dir" not in client.get("/health", headers={"host": "attacker.example"}).json()
    store.close()


def test_the_settings_that_guard_the_port() -> None:
    def settings(**given: object) -> Settings:
        base: dict[str, object] = {
            "mode": "record",
            "cassette": "default",
            "data_dir": ".freezeframe",
            "store": None,
            "listen": "127.0.0.1:8080",
            "admin": "127.0.0.1:8081",
            "upstream_ca": None,
        }
        return build(**{**base, **given})  # type: ignore[arg-type]

    assert settings().admin_token is None
    assert settings(admin="localhost:8081").admin_token is None
    assert settings(admin="[::1]:8081").admin_token is None
    assert settings(admin="0.0.0.0:8081", admin_token=TOKEN).admin_token == TOKEN
    with pytest.raises(ValueError, match=r"--admin 0\.0\.0\.0:8081 is reachable"):
        settings(admin="0.0.0.0:8081")
    with pytest.raises(ValueError, match="reachable from other machines"):
        settings(admin="myhost.example:8081")
    with pytest.raises(ValueError, match="is 15 characters; use at least 16"):
        settings(admin_token="x" * 15)
    assert TOKEN not in repr(settings(admin_token=TOKEN))
    assert settings().admin_trusted_proxies == (), "X-Forwarded-For is believed from no one"
    trusted = settings(
        admin_trusted_proxies=("10.0.0.7", " 10.0.1.0/24 ", "::1")
    ).admin_trusted_proxies
    assert trusted == ("10.0.0.7/32", "10.0.1.0/24", "::1/128")
    for bad in ("*", "proxy.internal", "10.0.0.7:8081"):
        with pytest.raises(ValueError, match="expected an IP address or network"):
            settings(admin_trusted_proxies=(bad,))
    hosts = settings(admin_hosts=("Freezeframe", "::1", "10.0.0.5", "proxy.internal.")).admin_hosts
    assert hosts == ("freezeframe", "[::1]", "10.0.0.5", "proxy.internal")
    for bad in ("evil.example:8081", "http://x", "a b"):
        with pytest.raises(ValueError, match="without a port"):
            settings(admin_hosts=(bad,))


def test_wrong_tokens_past_ten_a_minute_are_answered_429_even_the_right_one(
    client: TestClient, data_dir: Path
) -> None:
    form = client.get("/login")
    csrf = csrf_of(form.text)
    fields = {"csrf_token": csrf}
    for n in range(LOGIN_FAILURES):
        wrong = client.post("/login", data={**fields, "token": f"guess-{n}"})
        assert wrong.status_code == 401, n
    refused = client.post("/login", data={**fields, "token": TOKEN})
    assert refused.status_code == 429 and "Too many wrong tokens" in refused.text
    assert 1 <= int(refused.headers["retry-after"]) <= LOGIN_WINDOW
    assert SESSION_COOKIE not in client.cookies
    locked = client.get("/api/mode", headers=BEARER)
    assert locked.status_code == 429, "one count for the form and bearer headers (#26)"
    with app_client(data_dir, TOKEN) as other:  # a fresh process has forgotten the failures
        again = other.get("/login")
        token = csrf_of(again.text)
        signed_in = other.post("/login", data={"csrf_token": token, "token": TOKEN})
        assert signed_in.status_code == 303


def test_login_failures_are_counted_per_client_and_age_out() -> None:
    attempts = LoginAttempts(limit=2, window=0.3, clients=2)
    attempts.failed("10.0.0.1")
    assert attempts.wait("10.0.0.1") == 0
    attempts.failed("10.0.0.1")
    assert attempts.wait("10.0.0.1") == 1 and attempts.wait("10.0.0.2") == 0
    time.sleep(0.35)
    assert attempts.wait("10.0.0.1") == 0, "the failures aged out"
    attempts.failed("a")
    attempts.failed("a")
    attempts.succeeded("a")
    assert attempts.wait("a") == 0, "signing in clears the count"
    for client in ("b", "c", "d"):
        attempts.failed(client)
        attempts.failed(client)
    assert attempts.wait("b") == 0 and attempts.wait("d") == 1, "the oldest client forgotten"
