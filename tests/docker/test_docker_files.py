"""docker/: the image and the compose files, checked without a Docker engine.

* The compose files (each alone, and merged as ``docker compose -f A -f B`` merges them)
  are validated against the Compose Specification's JSON schema (vendored, see README.md
  here) and checked for what the example needs: a start order that needs no healthcheck,
  the proxy and CA variables, loopback-only ports, the shared data volume, the one-variable
  mode switch, no admin token asked for.
* The Dockerfile is parsed (a small parser, enough for this Dockerfile) and checked.
* The image's start-up is re-enacted in a plain venv: the entrypoint script with the
  Dockerfile's CMD and exactly the Dockerfile's ENV (plus PATH and HOME), ``/data`` mapped to
  a temporary dir and the two ports to free ports on 127.0.0.1 (the container binds 0.0.0.0;
  here only loopback is used). Readiness is the Dockerfile's own HEALTHCHECK command.
  The example agent then records through it against a local fake OpenAI, and replays.

What none of this covers: building the image and running containers. docker/smoke.sh does
that (CI runs it on podman), not this file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from jsonschema.protocols import Validator
from ruamel.yaml import YAML
from support.upstream import Upstream

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE / "compose-spec.json"
#: check-jsonschema 0.39.0, builtin_schemas/vendor/compose-spec.json (see README.md here).
SCHEMA_SHA256 = "d549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64"

BASE = DOCKER / "docker-compose.yml"
POSTGRES = DOCKER / "docker-compose.postgres.yml"
REPLICAS = DOCKER / "docker-compose.replicas.yml"
IMAGE_BASE = "python:3.12-slim"
#: PATH as the python:3.12-slim image sets it, which the Dockerfile's ENV PATH extends.
BASE_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The venv this test runs in stands in for the image's /opt/freezeframe.
VENV_BIN = Path(sys.executable).parent

STOP_TIMEOUT = 20.0
ADMIN_TOKEN = "compose-admin-token-0123456789"
SHELL: dict[str, str] = {}
"""A newcomer's shell: the compose files require no variable (not even an admin token)."""


# ---------------------------------------------------------------------------------------
# Compose: loading, interpolation, merging
# ---------------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    # YAML 1.2 (as docker compose's parser reads it); duplicate keys are an error.
    return YAML(typ="safe").load(path.read_text())


_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<default>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<invalid>))"
)


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's variable interpolation, for the forms these files may use: ``$$``,
    ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, and ``${VAR:?message}``
    (``${VAR?message}``), which stops with the message when VAR is empty (unset). Values
    only, not keys."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("invalid") is not None:
            raise ValueError(f"unsupported interpolation in {value!r}")
        name = match.group("braced") or match.group("named")
        op = match.group("op")
        current = env.get(name)
        if op == ":-" and not current:
            return str(match.group("default"))
        if op == "-" and current is None:
            return str(match.group("default"))
        if (op == ":?" and not current) or (op == "?" and current is None):
            raise MissingVariable(f"{name}: {match.group('default')}")
        return current or ""

    return _INTERPOLATION.sub(replace, value)


class MissingVariable(Exception):
    """A ``${VAR:?message}`` whose variable is not set: compose refuses to start."""


def merge(base: Any, override: Any, where: str = "") -> Any:
    """``docker compose -f base -f override``: mappings merge key by key, scalars are
    replaced. Sequences have per-attribute rules in the Compose spec (ports append,
    volumes merge by target, ...); these files avoid needing them, and this fails loudly
    if that changes instead of guessing."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value, f"{where}.{key}") if key in base else value
        return merged
    if isinstance(base, list) or isinstance(override, list):
        raise AssertionError(f"{where}: both files set a sequence; merge rules not modelled")
    return override


def compose(
    env: Mapping[str, str] | None = None, *, postgres: bool = False, replicas: bool = False
) -> dict[str, Any]:
    doc = load_yaml(BASE)
    if postgres:
        doc = merge(doc, load_yaml(POSTGRES))
    if replicas:
        doc = merge(doc, load_yaml(REPLICAS))
    return doc if env is None else interpolate(doc, env)


@pytest.fixture(scope="module")
def compose_validator() -> Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(validator: Validator, doc: Any) -> list[str]:
    return sorted(
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(doc)
    )


# ---------------------------------------------------------------------------------------
# Dockerfile: a small parser
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages and their instructions; continuation lines joined, comments dropped
    (also inside a continuation, as Docker does). No heredocs, no ``# escape=``."""
    assert not re.search(r"^#\s*escape\s*=", text, re.M), "escape directive not supported"
    stages: list[Stage] = []
    global_args: dict[str, str] = {}  # ARGs before the first FROM, with their defaults
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        logical = " ".join(part for part in parts if part)
        parts = []
        keyword, _, args = logical.partition(" ")
        assert "<<" not in args or keyword.upper() != "RUN", "heredocs not supported"
        instruction = Instruction(keyword.upper(), args.strip(), start)
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(expand(words[0], global_args), name))
        elif instruction.keyword == "ARG" and not stages:
            key, _, default = instruction.args.partition("=")
            global_args[key] = default
        else:
            assert stages, f"line {start}: {instruction.keyword} before FROM"
            stages[-1].instructions.append(instruction)
    assert not parts, "the Dockerfile ends inside a line continuation"
    return stages


def expand(value: str, env: Mapping[str, str]) -> str:
    """Dockerfile variable substitution (``$VAR``, ``${VAR}``) in ENV values."""
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), value)


def stage_env(stage: Stage, base_env: Mapping[str, str]) -> dict[str, str]:
    env = dict(base_env)
    for instruction in stage.all("ENV"):
        words = shlex.split(instruction.args)
        if "=" not in words[0]:  # legacy ``ENV KEY value with spaces``
            key, _, value = instruction.args.partition(" ")
            env[key] = expand(value.strip(), env)
            continue
        before = dict(env)  # all pairs of one ENV see the values from before it
        for word in words:
            key, sep, value = word.partition("=")
            assert sep, f"line {instruction.line}: {word!r} is not KEY=VALUE"
            env[key] = expand(value, before)
    return env


def exec_form(instruction: Instruction, text: str | None = None) -> list[str]:
    value = json.loads(instruction.args if text is None else text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), (
        f"line {instruction.line}: {instruction.keyword} must use the exec (JSON) form"
    )
    return value


@dataclass(frozen=True)
class Healthcheck:
    options: dict[str, str]
    command: list[str]

    def seconds(self, name: str, default: float) -> float:
        value = self.options.get(name)
        if value is None:
            return default
        match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", value)
        assert match, f"--{name}={value}: not a duration this test understands"
        return float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match.group(2)]


def parse_healthcheck(instruction: Instruction) -> Healthcheck:
    match = re.fullmatch(r"((?:--[a-z-]+=\S+\s+)*)CMD\s+(.+)", instruction.args, re.S)
    assert match, f"line {instruction.line}: HEALTHCHECK [OPTIONS] CMD [...] expected"
    options = dict(opt[2:].split("=", 1) for opt in match.group(1).split())
    return Healthcheck(options, exec_form(instruction, match.group(2)))


def parse_copy(instruction: Instruction) -> tuple[dict[str, str], list[str], str]:
    words = shlex.split(instruction.args)
    flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    return flags, paths[:-1], paths[-1]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile((DOCKER / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


@pytest.fixture(scope="module")
def image_env(final: Stage) -> dict[str, str]:
    """The environment a container of the image starts with (base image's PATH + ENV)."""
    return stage_env(final, {"PATH": BASE_IMAGE_PATH})


# ---------------------------------------------------------------------------------------
# Compose files
# ---------------------------------------------------------------------------------------


def test_vendored_schema_is_the_recorded_file() -> None:
    assert hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert SCHEMA_SHA256 in (HERE / "README.md").read_text()


COMPOSE_DOCUMENTS: dict[str, Callable[[], Any]] = {
    "docker-compose.yml": lambda: compose(),
    "docker-compose.postgres.yml": lambda: load_yaml(POSTGRES),
    "merged": lambda: compose(postgres=True),
    "docker-compose.yml, interpolated": lambda: compose(SHELL),
    "merged, interpolated, replay": lambda: compose(
        {**SHELL, "FREEZEFRAME_MODE": "replay", "OPENAI_API_KEY": "sk-x"}, postgres=True
    ),
    "docker-compose.replicas.yml": lambda: load_yaml(REPLICAS),
    "merged with replicas, interpolated": lambda: compose(SHELL, postgres=True, replicas=True),
}


def test_three_replicas_answer_to_one_name_and_share_the_store_and_the_ca() -> None:
    services = compose(SHELL, postgres=True, replicas=True)["services"]
    first = services["freezeframe"]
    others = [services["freezeframe-2"], services["freezeframe-3"]]
    assert first["networks"]["default"]["aliases"] == ["freezeframe-1"]
    hosts = "freezeframe,freezeframe-1,freezeframe-2,freezeframe-3"
    for n, replica in enumerate([first, *others], 1):
        env = replica["environment"]
        assert env["FREEZEFRAME_STORE"] == first["environment"]["FREEZEFRAME_STORE"]
        assert env["FREEZEFRAME_REPLAY_SESSION"] == "compose"
        # Nothing an agent was answered is lost when a replica is killed.
        assert env["FREEZEFRAME_DURABILITY"] == "strict"
        assert env["FREEZEFRAME_ADMIN_HOSTS"] == hosts
        assert env["FREEZEFRAME_ADMIN_TOKEN"] == ""  # each reads /data/admin-token
        assert replica["volumes"] == ["freezeframe-data:/data"]
        if n > 1:
            assert replica["networks"]["default"]["aliases"] == ["freezeframe", f"freezeframe-{n}"]
            assert replica["depends_on"] == ["freezeframe", "postgres"]
            # The first replica makes the CA (and empties the cassette under FRESH) first.
            assert env["FREEZEFRAME_WAIT_FOR"] == "http://freezeframe-1:8081/health"
            assert "FREEZEFRAME_FRESH" not in env, "only the first replica may empty it"
            assert "ports" not in replica, "the host's ports belong to the first replica"
    assert services["agent"]["environment"]["HTTPS_PROXY"] == "http://freezeframe:8080"


@pytest.mark.parametrize("name", COMPOSE_DOCUMENTS)
def test_compose_files_follow_the_compose_spec(name: str, compose_validator: Validator) -> None:
    assert schema_errors(compose_validator, COMPOSE_DOCUMENTS[name]()) == []


def test_the_schema_check_is_not_vacuous(compose_validator: Validator) -> None:
    doc = compose(SHELL)
    doc["services"]["agent"]["enviroment"] = {"X": "1"}
    doc["services"]["agent"]["depends_on"] = {"freezeframe": {"condition": "healthy"}}
    errors = schema_errors(compose_validator, doc)
    assert any("enviroment" in e for e in errors), errors
    assert any("depends_on" in e for e in errors), errors


def test_agent_starts_beside_freezeframe_and_is_wired_to_it() -> None:
    """No ``condition: service_healthy``: podman 4.3 without systemd never runs
    healthchecks, so it would wait forever. The agent waits for /health itself."""
    services = compose(SHELL)["services"]
    assert set(services) == {"freezeframe", "agent"}
    agent = services["agent"]
    assert agent["depends_on"] == ["freezeframe"]
    assert agent["build"] == {
        "context": "./example-agent",
        "args": {"BASE_IMAGE": IMAGE_BASE},
    }
    assert agent["image"] == "freezeframe-example-agent:local"
    agent_py = (DOCKER / "example-agent" / "agent.py").read_text()
    assert '/health"' in agent_py and "WAIT_SECONDS" in agent_py
    assert agent["environment"] == {
        "HTTPS_PROXY": "http://freezeframe:8080",
        "HTTP_PROXY": "http://freezeframe:8080",
        "https_proxy": "http://freezeframe:8080",
        "http_proxy": "http://freezeframe:8080",
        "NO_PROXY": "freezeframe",
        "no_proxy": "freezeframe",
        "SSL_CERT_FILE": "/data/ca-bundle.pem",
        "REQUESTS_CA_BUNDLE": "/data/ca-bundle.pem",
        "NODE_EXTRA_CA_CERTS": "/data/mitmproxy-ca-cert.pem",
        "FREEZEFRAME_ADMIN_URL": "http://freezeframe:8081",
        "OPENAI_API_KEY": "sk-replay-placeholder",
    }
    # The CA reaches the agent through freezeframe's data volume, read-only.
    assert agent["volumes"] == ["freezeframe-data:/data:ro"]


def test_freezeframe_service_builds_the_image_and_keeps_its_data_on_a_volume() -> None:
    doc = compose(SHELL)
    freezeframe = doc["services"]["freezeframe"]
    assert freezeframe["build"] == {
        "context": "..",
        "dockerfile": "docker/Dockerfile",
        "args": {"BASE_IMAGE": IMAGE_BASE},
    }
    local = compose({"FREEZEFRAME_BASE_IMAGE": "localhost/freezeframe-base:k"})["services"]
    for service in local.values():
        assert service["build"]["args"] == {"BASE_IMAGE": "localhost/freezeframe-base:k"}
    assert (BASE.parent / freezeframe["build"]["context"]).resolve() == REPO
    assert freezeframe["volumes"] == ["freezeframe-data:/data"]
    assert "freezeframe-data" in doc["volumes"]
    # Published on the host's loopback only, onto the container ports the image listens on.
    assert freezeframe["ports"] == ["127.0.0.1:8080:8080", "127.0.0.1:8081:8081"]
    moved = compose({"FREEZEFRAME_PROXY_PORT": "127.0.0.1:18080"})["services"]["freezeframe"]
    assert moved["ports"][0] == "127.0.0.1:18080:8080"
    assert "healthcheck" not in freezeframe  # the image's HEALTHCHECK, for engines that run it


GUARD = {"FREEZEFRAME_ADMIN_TOKEN": "", "FREEZEFRAME_ADMIN_HOSTS": "freezeframe"}
"""What the freezeframe service sets for its admin port, whatever the mode: no token given,
so the image's entrypoint reads (or first writes) /data/admin-token."""


def test_mode_and_cassette_are_switched_by_one_variable() -> None:
    raw = compose()["services"]["freezeframe"]["environment"]
    assert raw == {
        "FREEZEFRAME_MODE": "${FREEZEFRAME_MODE:-record}",
        "FREEZEFRAME_CASSETTE": "${FREEZEFRAME_CASSETTE:-default}",
        "FREEZEFRAME_FRESH": "${FREEZEFRAME_FRESH:-}",
        "FREEZEFRAME_ADMIN_TOKEN": "${FREEZEFRAME_ADMIN_TOKEN:-}",
        "FREEZEFRAME_ADMIN_HOSTS": "freezeframe",
    }
    defaults = {"FREEZEFRAME_MODE": "record", "FREEZEFRAME_CASSETTE": "default"}
    env = compose(SHELL)["services"]["freezeframe"]["environment"]
    assert env == {**defaults, "FREEZEFRAME_FRESH": "", **GUARD}
    replay = compose({**SHELL, "FREEZEFRAME_MODE": "replay", "FREEZEFRAME_CASSETTE": "bug-8821"})
    assert replay["services"]["freezeframe"]["environment"] == {
        "FREEZEFRAME_MODE": "replay",
        "FREEZEFRAME_CASSETTE": "bug-8821",
        "FREEZEFRAME_FRESH": "",
        **GUARD,
    }
    fresh = compose({"FREEZEFRAME_FRESH": "1"})["services"]["freezeframe"]["environment"]
    assert fresh["FREEZEFRAME_FRESH"] == "1"
    given = compose({"FREEZEFRAME_ADMIN_TOKEN": ADMIN_TOKEN})["services"]
    assert given["freezeframe"]["environment"]["FREEZEFRAME_ADMIN_TOKEN"] == ADMIN_TOKEN
    real_key = compose({**SHELL, "OPENAI_API_KEY": "sk-real"})
    assert real_key["services"]["agent"]["environment"]["OPENAI_API_KEY"] == "sk-real"


def test_compose_needs_no_variable_to_record_or_replay() -> None:
    """No admin token asked for (it was: ``${FREEZEFRAME_ADMIN_TOKEN:?...}``), in any file
    or merge, recording or replaying; nothing else required either."""
    for mode in ({}, {"FREEZEFRAME_MODE": "replay"}):
        for files in ({}, {"postgres": True}, {"postgres": True, "replicas": True}):
            compose(mode, **files)  # raises MissingVariable for a ${VAR:?...}
    texts = [path.read_text() for path in (BASE, POSTGRES, REPLICAS)]
    assert not any(":?" in text or "?}" in text for text in texts)


def test_postgres_override_stores_in_postgres_once_it_is_healthy() -> None:
    services = compose(SHELL, postgres=True)["services"]
    freezeframe, postgres = services["freezeframe"], services["postgres"]
    assert freezeframe["environment"] == {
        "FREEZEFRAME_MODE": "record",
        "FREEZEFRAME_CASSETTE": "default",
        "FREEZEFRAME_FRESH": "",
        "FREEZEFRAME_STORE": "postgresql://freezeframe:freezeframe@postgres:5432/freezeframe",
        **GUARD,
    }
    # The image's entrypoint waits for the database itself: no healthcheck needed.
    assert freezeframe["depends_on"] == ["postgres"]
    assert services["agent"]["depends_on"] == ["freezeframe"]
    assert postgres["image"] == "postgres:16"
    local = compose({"FREEZEFRAME_POSTGRES_IMAGE": "freezeframe-postgres:local"}, postgres=True)
    assert local["services"]["postgres"]["image"] == "freezeframe-postgres:local"
    assert postgres["environment"] == {
        "POSTGRES_USER": "freezeframe",
        "POSTGRES_PASSWORD": "freezeframe",
        "POSTGRES_DB": "freezeframe",
    }
    test = postgres["healthcheck"]["test"]
    assert test[:2] == ["CMD", "pg_isready"] and "127.0.0.1" in test
    assert "ports" not in postgres


@pytest.mark.skipif(
    shutil.which("docker-compose") is None,
    reason="docker-compose (v1, Debian's docker-compose package) not installed: "
    "no second opinion from a real compose implementation",
)
def test_docker_compose_v1_accepts_and_merges_the_files() -> None:
    """docker compose v2 is not installable here; v1's ``config`` validates, interpolates
    and merges offline (with its own older schema and v1 semantics)."""
    env = {"PATH": os.environ["PATH"], "FREEZEFRAME_MODE": "replay", **SHELL}
    result = subprocess.run(
        ["docker-compose", "-f", str(BASE), "-f", str(POSTGRES), "config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    services = YAML(typ="safe").load(result.stdout)["services"]
    assert services["freezeframe"]["environment"]["FREEZEFRAME_MODE"] == "replay"
    assert services["freezeframe"]["environment"]["FREEZEFRAME_STORE"].startswith("postgresql:")
    assert services["agent"]["depends_on"]["freezeframe"]["condition"] == "service_started"


# ---------------------------------------------------------------------------------------
# Dockerfile, statically
# ---------------------------------------------------------------------------------------


def test_every_stage_is_python_312_slim_unless_a_build_argument_names_another(
    stages: list[Stage],
) -> None:
    assert [stage.base for stage in stages] == [IMAGE_BASE, IMAGE_BASE]
    text = (DOCKER / "Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={IMAGE_BASE}\n" in text
    assert text.count("FROM ${BASE_IMAGE}") == 2
    assert stages[0].name == "builder"
    copied_from = {parse_copy(i)[0].get("from") for i in stages[-1].all("COPY")}
    assert "builder" in copied_from


DOCKERFILES = [
    DOCKER / "Dockerfile",
    DOCKER / "example-agent" / "Dockerfile",
    DOCKER / "postgres-local" / "Dockerfile",
]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda path: path.parent.name)
def test_dockerfiles_build_without_buildkit(path: Path) -> None:
    """Docker's legacy builder and podman build them too: no ``# syntax=`` directive, no
    ``COPY --chmod`` / ``--link``, no ``RUN --mount``, no heredocs."""
    text = path.read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)
    for stage in parse_dockerfile(text):
        for instruction in stage.instructions:
            flags = re.findall(r"--([a-z-]+)", instruction.args.split("<<")[0])
            if instruction.keyword in ("COPY", "ADD"):
                assert set(flags) <= {"from"}, (path, instruction)
            if instruction.keyword == "RUN":
                assert not instruction.args.startswith("--"), (path, instruction)


def test_builder_copies_everything_the_wheel_is_built_from(stages: list[Stage]) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {f"{module}.py" for module in setuptools["py-modules"]}
    needed |= {package.split(".")[0] for package in setuptools["packages"]}
    # The top-level folders that package-dir maps into freezeframe, and setup.py, which adds
    # cli.py to it.
    needed |= set(setuptools["package-dir"].values()) | {"setup.py", "cli.py"}
    copied = {source.rstrip("/") for i in stages[0].all("COPY") for source in parse_copy(i)[1]}
    assert needed <= copied, f"not copied into the builder: {sorted(needed - copied)}"
    for source in copied:
        assert (REPO / source).exists(), source
    run = " ".join(i.args for i in stages[0].all("RUN"))
    assert "pip wheel" in run and "/opt/freezeframe" in run


def test_dockerignore_keeps_the_context_small_but_not_what_is_copied(
    stages: list[Stage],
) -> None:
    lines = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert {".venv", ".git", ".freezeframe", ".pytest_cache", ".hypothesis"} <= set(patterns)
    assert all(not p.startswith("!") for p in patterns)  # the check below assumes no negation
    copied = [
        source.rstrip("/")
        for stage in stages
        for i in stage.all("COPY")
        if "from" not in parse_copy(i)[0]
        for source in parse_copy(i)[1]
    ]
    for source in copied:
        prefixes = ["/".join(source.split("/")[: n + 1]) for n in range(source.count("/") + 1)]
        excluded = [p for p in patterns for prefix in prefixes if fnmatch(prefix, p)]
        assert not excluded, f"{source} is copied but excluded by {excluded}"


def test_runs_as_a_non_root_user_that_owns_data(final: Stage) -> None:
    user = final.last("USER").args
    uid, _, gid = user.partition(":")
    assert uid not in ("", "0", "root") and gid not in ("0", "root"), user
    instructions = final.instructions
    volume_at = next(n for n, i in enumerate(instructions) if i.keyword == "VOLUME")
    # Changes to a volume's path after VOLUME are discarded: the chown must come first.
    chowns = [i.args for i in instructions[:volume_at] if i.keyword == "RUN" and "chown" in i.args]
    assert any(f"chown {uid}:{gid or uid} /data" in run for run in chowns), chowns
    assert instructions.index(final.last("USER")) > volume_at


def test_data_volume_ports_and_environment_defaults(final: Stage, image_env: dict) -> None:
    volumes = [i.args for i in final.all("VOLUME")]
    assert volumes in (["/data"], ['["/data"]'])
    exposed = {port for i in final.all("EXPOSE") for port in i.args.split()}
    assert exposed == {"8080", "8081"}
    assert {k: v for k, v in image_env.items() if k.startswith("FREEZEFRAME_")} == {
        "FREEZEFRAME_DATA_DIR": "/data",
        "FREEZEFRAME_LISTEN": "0.0.0.0:8080",
        "FREEZEFRAME_ADMIN": "0.0.0.0:8081",
        "FREEZEFRAME_MODE": "record",
        "FREEZEFRAME_CASSETTE": "default",
    }
    assert image_env["PATH"] == f"/opt/freezeframe/bin:{BASE_IMAGE_PATH}"
    assert final.last("WORKDIR").args == "/data"


def test_healthcheck_asks_the_admin_api_with_python(final: Stage) -> None:
    check = parse_healthcheck(final.last("HEALTHCHECK"))
    assert check.command[:2] == ["python", "-c"], check.command
    assert "http://127.0.0.1:{port}/health" in check.command[2]
    assert "FREEZEFRAME_ADMIN" in check.command[2] and "'8081'" in check.command[2]
    assert set(check.options) <= {"interval", "timeout", "start-period", "retries"}
    assert check.seconds("timeout", 30) <= check.seconds("interval", 30)


def test_entrypoint_is_the_script_and_cmd_is_run(final: Stage, image_env: dict) -> None:
    assert exec_form(final.last("ENTRYPOINT")) == ["freezeframe-entrypoint"]
    assert exec_form(final.last("CMD")) == ["run"]
    script = entrypoint_script(final, image_env)
    assert script == DOCKER / "entrypoint.sh"
    assert os.access(script, os.X_OK), "docker/entrypoint.sh lost its executable bit"
    assert script.read_text().startswith("#!/bin/sh\n")


def test_example_agent_image(final: Stage) -> None:
    agent = parse_dockerfile((DOCKER / "example-agent" / "Dockerfile").read_text())
    assert [stage.base for stage in agent] == [IMAGE_BASE, IMAGE_BASE]
    assert "pip" in agent[0].last("RUN").args and "openai" in agent[0].last("RUN").args
    assert exec_form(agent[-1].last("CMD")) == ["python", "agent.py"]
    assert parse_copy(agent[-1].last("COPY"))[1] == ["agent.py"]
    agent_uid = agent[-1].last("USER").args.partition(":")[0]
    assert agent_uid not in ("0", "root", final.last("USER").args.partition(":")[0])


def entrypoint_script(final: Stage, image_env: Mapping[str, str]) -> Path:
    """The repository file the image runs as its ENTRYPOINT (found through COPY and PATH)."""
    program = exec_form(final.last("ENTRYPOINT"))[0]
    for instruction in final.all("COPY"):
        flags, sources, dest = parse_copy(instruction)
        on_path = Path(dest).parent.as_posix() in image_env["PATH"].split(":")
        if "from" not in flags and len(sources) == 1 and on_path and Path(dest).name == program:
            return REPO / sources[0]
    raise AssertionError(f"ENTRYPOINT {program!r} is not a file COPY'd onto the image's PATH")


SHELL_SCRIPTS = [
    DOCKER / "entrypoint.sh",
    DOCKER / "smoke.sh",
    DOCKER / "local-base.sh",
    DOCKER / "postgres-local" / "entrypoint.sh",
]


def test_shell_scripts_are_posix_and_executable() -> None:
    for script in SHELL_SCRIPTS:
        assert script.read_text().startswith("#!/bin/sh\n"), script
        assert os.access(script, os.X_OK), f"{script} lost its executable bit"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shell_scripts_pass_shellcheck() -> None:
    result = subprocess.run(
        ["shellcheck", "--shell=sh", *map(str, SHELL_SCRIPTS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------
# The image's start-up, re-enacted in this venv
# ---------------------------------------------------------------------------------------


def free_port() -> int:
    from freezeframe.proxy.ports import unused_port

    return unused_port()


@dataclass
class Container:
    """The entrypoint running as the image would run it, mapped onto this machine."""

    data_dir: Path
    port: int
    admin_port: int
    env: dict[str, str]
    healthcheck: Healthcheck
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def admin(self, path: str) -> httpx.Response:
        with httpx.Client(trust_env=False, timeout=10) as client:
            return client.get(f"http://127.0.0.1:{self.admin_port}{path}")

    def healthy(self, **extra_env: str) -> bool:
        """Run the Dockerfile's HEALTHCHECK command as Docker would, in the container's env."""
        try:
            result = subprocess.run(
                self.healthcheck.command,
                env={**self.env, **extra_env},
                capture_output=True,
                timeout=self.healthcheck.seconds("timeout", 30),
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return result.returncode == 0

    def wait_healthy(self) -> float:
        """Until the HEALTHCHECK succeeds, within the time Docker would allow before
        calling the container unhealthy (start period + retries x interval); polled
        faster than the interval to keep the test quick."""
        check = self.healthcheck
        retries = int(check.options.get("retries", "3"))
        budget = check.seconds("start-period", 0) + retries * check.seconds("interval", 30)
        started = time.monotonic()
        while time.monotonic() - started < budget:
            if self.process.poll() is not None:
                raise AssertionError(f"exited with {self.process.returncode}:\n{self.log}")
            if self.healthy():
                return time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"HEALTHCHECK did not pass within {budget:.0f} s:\n{self.log}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"still running {STOP_TIMEOUT} s after SIGTERM:\n{self.log}"
            raise AssertionError(message) from None

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT)


def to_local(value: str, data_dir: Path, ports: Mapping[int, int], host: str) -> str:
    """Map a container-side value onto this machine: /data, the venv, ports, host names."""
    value = value.replace("/opt/freezeframe/bin", str(VENV_BIN))
    if value == "/data" or value.startswith("/data/"):
        value = str(data_dir) + value[len("/data") :]
    for container_port, local_port in ports.items():
        value = value.replace(f"0.0.0.0:{container_port}", f"127.0.0.1:{local_port}")
        value = value.replace(f"{host}:{container_port}", f"127.0.0.1:{local_port}")
    return "127.0.0.1" if value == host else value


@pytest.fixture
def run_image(
    final: Stage, image_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., Container]]:
    started: list[Container] = []
    script = entrypoint_script(final, image_env)
    command = [str(script), *exec_form(final.last("CMD"))]
    data_dir = tmp_path / "data"
    ports = {8080: free_port(), 8081: free_port()}

    def start(
        compose_env: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
    ) -> Container:
        """Start with the image's ENV, overlaid by a compose service's ``environment``."""
        env = {**image_env, **(compose_env or {})}
        env = {k: to_local(v, data_dir, ports, "freezeframe") for k, v in env.items()}
        leftovers = {k: v for k, v in env.items() if "0.0.0.0" in v or "/opt/" in v}
        assert not leftovers, f"container values not mapped onto this machine: {leftovers}"
        env["HOME"] = str(data_dir)  # the image user's home is /data
        env.update(extra or {})
        data_dir.mkdir(exist_ok=True)  # the image's empty /data (mkdir -p: 0755), its WORKDIR
        data_dir.chmod(0o755)
        log_path = tmp_path / f"entrypoint-{len(started)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                env=env,
                cwd=data_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                umask=0o022,  # Docker's default for a container's processes
            )
        container = Container(
            data_dir,
            ports[8080],
            ports[8081],
            env,
            parse_healthcheck(final.last("HEALTHCHECK")),
            process,
            log_path,
        )
        started.append(container)
        return container

    try:
        yield start
    finally:
        for container in started:
            container.kill()


def test_the_image_entrypoint_starts_the_proxy(run_image: Callable[..., Container]) -> None:
    container = run_image()
    assert container.env["FREEZEFRAME_LISTEN"] == f"127.0.0.1:{container.port}"
    container.wait_healthy()
    health = container.admin("/health").json()
    assert health["status"] == "ok"
    assert (health["mode"], health["cassette"]) == ("record", "default")
    assert health["proxy"] == f"127.0.0.1:{container.port}"

    data = container.data_dir
    ca = (data / "mitmproxy-ca-cert.pem").read_bytes()
    bundle = (data / "ca-bundle.pem").read_bytes()
    assert ca.strip() in bundle and bundle.count(b"BEGIN CERTIFICATE") > 1
    # What an agent (another uid, sharing the volume read-only) can and cannot read.
    for name in ("mitmproxy-ca-cert.pem", "ca-bundle.pem"):
        assert (data / name).stat().st_mode & stat.S_IROTH, name
    for name in ("mitmproxy-ca.pem", "secret.key"):
        assert not (data / name).stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO), name
    assert data.stat().st_mode & stat.S_IXOTH

    with socket.create_connection(("127.0.0.1", container.port), timeout=5):
        pass  # the proxy port is open too
    # A proxy configured for freezeframe's own upstream traffic must not catch the check.
    assert container.healthy(HTTP_PROXY="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")
    assert container.stop() == 0, container.log
    assert not container.healthy()  # and the check does fail when nothing answers


def test_the_image_honours_freezeframe_mode_and_cassette(
    run_image: Callable[..., Container],
) -> None:
    container = run_image({"FREEZEFRAME_MODE": "replay", "FREEZEFRAME_CASSETTE": "bug-8821"})
    container.wait_healthy()
    state = container.admin("/api/mode").json()
    assert (state["mode"], state["cassette"]) == ("replay", "bug-8821"), state
    assert container.stop() == 0, container.log


def test_entrypoint_passes_other_commands_and_options_through(
    final: Stage, image_env: dict[str, str], tmp_path: Path
) -> None:
    env = {k: to_local(v, tmp_path / "data", {}, "freezeframe") for k, v in image_env.items()}
    env["HOME"] = str(tmp_path)
    script = str(entrypoint_script(final, image_env))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    ca = run("ca")  # `docker run IMAGE ca`: passed through, reading FREEZEFRAME_DATA_DIR
    assert ca.returncode == 1
    assert f"no CA at {tmp_path / 'data' / 'mitmproxy-ca-cert.pem'}" in ca.stderr
    assert not (tmp_path / "data").exists(), "a command other than run created files"
    options = run("--help")  # `docker run IMAGE --mode replay` means `run --mode replay`
    assert options.returncode == 0, options.stderr
    assert "Usage: freezeframe run" in options.stdout


def test_the_image_writes_its_admin_token_when_none_is_given(
    run_image: Callable[..., Container],
) -> None:
    """`docker run IMAGE` with no FREEZEFRAME_ADMIN_TOKEN and the image's admin port on
    every interface: the entrypoint writes a token to /data/admin-token (owner-only), keeps
    it across starts, and the admin API asks for it; /health stays public. Here the admin
    port binds 0.0.0.0 as in the image (the token guards it) and is reached on 127.0.0.1."""
    admin = f"0.0.0.0:{free_port()}"
    container = run_image(extra={"FREEZEFRAME_ADMIN": admin})
    container.admin_port = int(admin.rpartition(":")[2])
    container.wait_healthy()
    path = container.data_dir / "admin-token"
    token = path.read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token), token
    assert not path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    assert token not in container.log
    assert "the admin API's token is in" in container.log
    assert container.admin("/health").status_code == 200
    assert container.admin("/api/mode").status_code == 401
    with httpx.Client(trust_env=False, timeout=10) as client:
        mode = client.get(
            f"http://127.0.0.1:{container.admin_port}/api/mode",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert mode.status_code == 200, mode.text
    assert container.stop() == 0, container.log

    again = run_image(extra={"FREEZEFRAME_ADMIN": admin})
    again.admin_port = container.admin_port
    again.wait_healthy()
    assert path.read_text().strip() == token  # the same token on the next start
    assert again.stop() == 0, again.log


def test_the_image_writes_no_token_for_a_loopback_admin_port(
    run_image: Callable[..., Container],
) -> None:
    container = run_image()  # the admin port mapped onto 127.0.0.1, as every test here
    container.wait_healthy()
    assert not (container.data_dir / "admin-token").exists()
    assert container.admin("/api/mode").status_code == 200
    assert container.stop() == 0, container.log


def test_example_agent_records_then_replays_through_the_image(
    run_image: Callable[..., Container],
    upstream: Upstream,
    upstream_ca_file: Path,
    tmp_path: Path,
) -> None:
    """docker-compose.yml's two commands, re-enacted: the freezeframe service's environment
    (interpolated as compose would) over the image's, the agent's environment mapped onto
    this machine. Additions: the local fake OpenAI (OPENAI_BASE_URL) and its CA
    (FREEZEFRAME_UPSTREAM_CA), since api.openai.com is not reachable here."""
    agent_dir = DOCKER / "example-agent"
    agent_cmd = exec_form(parse_dockerfile((agent_dir / "Dockerfile").read_text())[-1].last("CMD"))

    def up(shell_env: dict[str, str]) -> tuple[Container, list[str]]:
        services = compose(shell_env)["services"]
        container = run_image(
            services["freezeframe"]["environment"],
            {"FREEZEFRAME_UPSTREAM_CA": str(upstream_ca_file)},
        )
        container.wait_healthy()
        env = {
            k: to_local(
                str(v),
                container.data_dir,
                {8080: container.port, 8081: container.admin_port},
                "freezeframe",
            )
            for k, v in services["agent"]["environment"].items()
        }
        env |= {
            "PATH": f"{VENV_BIN}:{BASE_IMAGE_PATH}",
            "HOME": str(tmp_path),
            "OPENAI_BASE_URL": f"{upstream.base_url}/v1",
        }
        agent = subprocess.run(
            agent_cmd,
            env=env,
            cwd=agent_dir,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert container.stop() == 0, container.log
        assert agent.returncode == 0, agent.stdout + agent.stderr + container.log
        return container, agent.stdout.splitlines()

    container, recorded = up({**SHELL, "OPENAI_API_KEY": "sk-test-a-real-looking-key-0123456789"})
    assert len(recorded) == 1 and recorded[0].startswith("model: ")
    assert len(upstream.requests) == 1
    assert "freezeframe record: proxy on" in container.log
    for stored in container.data_dir.glob("freezeframe.db*"):
        assert b"sk-test-a-real" not in stored.read_bytes(), stored

    upstream.reset_counters()
    replaying, replayed = up({**SHELL, "FREEZEFRAME_MODE": "replay"})  # the placeholder key
    assert replayed == recorded
    assert "freezeframe replay: proxy on" in replaying.log
    assert upstream.connections == 0


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_readme_links_resolve() -> None:
    """docker/README.md's pointers lead somewhere (its pointer to "Securing the admin port"
    once named a section the main README does not have)."""
    readme = DOCKER / "README.md"
    links = re.findall(r"\]\((?!https?:)([^)#\s]+)(?:#([^)\s]+))?\)", readme.read_text())
    assert any(anchor == "securing-the-admin-port" for _, anchor in links), links
    for target, anchor in links:
        path = (readme.parent / target).resolve()
        assert path.exists(), target
        if anchor:
            assert anchor in _anchors(path.read_text()), f"{target}#{anchor}"
