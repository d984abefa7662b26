"""The proxy's settings as the command line offers them: each flag with its help, its
default and its ``FREEZEFRAME_*`` variable, in ``--help``'s order.

``run`` and ``exec`` take every one; ``settings.build`` takes their values by name and turns
them into a ``Settings``. Declared here, beside the settings they set, as mitmproxy's addons
declare their options (type, default, help) rather than in the command line's own file; the
command line makes a click option of each (``cli._run_options``), and docs/settings.md's
table is checked against them (tests/test_docs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from freezeframe.proxy.settings import DEFAULT_ADMIN, DEFAULT_LISTEN


@dataclass(frozen=True, slots=True)
class Flag:
    """One setting: ``--flag`` (its variable FREEZEFRAME_FLAG unless ``envvar``)."""

    flag: str
    help: str
    default: str | bool | None = None
    metavar: str | None = None
    name: str | None = None
    """The setting's name when it is not the flag's (``--admin-host``: admin_hosts)."""
    separator: str | None = None
    """Repeatable, its variable's values separated by this."""
    is_flag: bool = False
    envvar: str | None = None


RUN_FLAGS = (
    Flag("--mode", "record, replay, auto or passthrough.", "record"),
    Flag(
        "--cassette",
        "Default cassette; X-Freezeframe-Cassette overrides it per request.",
        "default",
    ),
    Flag("--listen", "Proxy address (HTTPS_PROXY points here).", DEFAULT_LISTEN),
    Flag("--admin", "Admin API address.", DEFAULT_ADMIN),
    Flag(
        "--admin-token",
        "Secret the admin API and case file ask for (bearer header, login form); required "
        "when --admin is not a loopback address. Prefer the variable: flags show in ps.",
        metavar="TOKEN",
    ),
    Flag(
        "--admin-host",
        "Another name the admin port answers to in the Host header, beside its address and "
        "localhost (repeatable; env: comma-separated).",
        metavar="NAME",
        name="admin_hosts",
        separator=",",
        envvar="FREEZEFRAME_ADMIN_HOSTS",
    ),
    Flag(
        "--admin-trusted-proxy",
        "A reverse proxy (address or CIDR) in front of the admin port whose X-Forwarded-For "
        "is believed; from anyone else it is ignored (repeatable; env: comma-separated).",
        metavar="ADDR",
        name="admin_trusted_proxies",
        separator=",",
        envvar="FREEZEFRAME_ADMIN_TRUSTED_PROXIES",
    ),
    Flag(
        "--upstream-ca",
        "Extra CA (PEM) trusted for upstream servers, on top of the system's.",
        metavar="FILE",
    ),
    Flag(
        "--replay-pace",
        "recorded, instant, or a factor on recorded delays (0.5 = twice as fast).",
        "recorded",
    ),
    Flag(
        "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
    ),
    Flag(
        "--reverse",
        "Also serve plain HTTP on PORT, forwarded to URL (repeatable; env: comma-separated).",
        metavar="NAME=URL@PORT",
        separator=",",
    ),
    Flag(
        "--upstream-proxy",
        "Forward through this proxy: http(s)://[user:password@]host:port.",
        metavar="URL",
    ),
    Flag(
        "--redact-header",
        "Another header never to store in the clear (repeatable; env: comma-separated).",
        metavar="NAME",
        name="redact_headers",
        separator=",",
        envvar="FREEZEFRAME_REDACT_HEADERS",
    ),
    Flag(
        "--redact-pattern",
        "A regex whose matches in bodies are never stored (repeatable; env: one per line).",
        metavar="REGEX",
        name="redact_patterns",
        separator="\n",
        envvar="FREEZEFRAME_REDACT_PATTERNS",
    ),
    Flag(
        "--annotate",
        "Add X-Freezeframe-Hit/-Drift/-Rewrite/-Miss/-Recorded headers to answers.",
        False,
        is_flag=True,
    ),
    Flag(
        "--miss-details/--no-miss-details",
        "Quote the nearest recording's differing values in miss answers  "
        "[default: off for run; on for exec, whose proxy serves one run]",
        envvar="FREEZEFRAME_MISS_DETAILS",
    ),
    Flag(
        "--fresh",
        "Empty the cassette before recording into it (record and auto modes).",
        False,
        is_flag=True,
    ),
    Flag(
        "--live",
        "In replay, send these requests upstream for real (repeatable; env: comma-separated).",
        metavar="HOST[/PATH-GLOB]",
        separator=",",
    ),
    Flag(
        "--record-into",
        "In replay, record the new run (live answers, and replayed ones marked so) here.",
        metavar="NAME",
    ),
    Flag(
        "--after-miss",
        "miss, or live: --live routes replay until the run first misses, then go upstream.",
        "miss",
    ),
    Flag(
        "--durability",
        "batched, or strict: an answer's end reaches the client once its exchange is stored.",
        "batched",
    ),
    Flag(
        "--store-writer",
        "process, or thread: where the store's commits, compression and indexing run.",
        "process",
    ),
    Flag(
        "--max-age",
        "Remove cassettes with no exchange newer than this (30d, 12h), at start and hourly.",
        metavar="DURATION",
    ),
    Flag(
        "--perturb",
        "In replay, perturb recorded answers: KIND[=ARG][@HOST[/PATH-GLOB]][:P],… "
        "(docs/ci.md, Fuzzing around the fixture).",
        metavar="SPEC",
    ),
    Flag("--seed", "Seed of --perturb's rolls  [default: drawn at start and logged]", metavar="N"),
    Flag(
        "--replay-session",
        "Count replay positions in the store under NAME, shared by replicas replaying together.",
        metavar="NAME",
    ),
)
