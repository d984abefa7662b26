"""The contract's settings table as one frozen object.

The CLI resolves flag > environment variable > default (click does that), then hands
over strings; this module turns them into typed values once and says exactly what is
wrong with a bad one, so a typo in a compose file fails at start with one line rather
than at the first request.
"""

from __future__ import annotations

import ipaddress
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

from freezeframe.addons.state import RECORDED_PACE, Mode, parse_pace
from freezeframe.storage.names import validate_cassette_name

if TYPE_CHECKING:
    from freezeframe.canonicalize import Route
    from freezeframe.storage import Store
    from freezeframe.whatif.perturb import Perturbation

# The command line reads the defaults and Address from here for every command, `--help`
# too; the validators that need cryptography, the key rules or the perturbation grammar
# import them when they run, so that reading a store never pays for them.

DEFAULT_DATA_DIR = "./.freezeframe"
DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_ADMIN = "127.0.0.1:8081"
DB_FILENAME = "freezeframe.db"
OUTBOX_DIRNAME = "outbox"
CA_FILENAME = "mitmproxy-ca-cert.pem"
KEY_FILENAME = "secret.key"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MIN_TOKEN_LENGTH = 16
"""Shorter admin tokens are refused: a guessable secret on a reachable port is no secret."""
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, value: str, what: str) -> Address:
        """``host:port``, ``:port``, ``port`` or ``[v6]:port``."""
        text = value.strip()
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = "", text
        host = host.strip("[]") or "127.0.0.1"
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"{what} {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8080") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"{what} {value!r}: port must be between 0 and 65535")
        if host != "localhost" and any(c in host for c in " /?#@"):
            raise ValueError(f"{what} {value!r}: {host!r} is not a host name or address")
        return cls(host, port)

    @property
    def is_loopback(self) -> bool:
        """Whether only this machine can reach the address (``localhost`` or 127.0.0.0/8, ::1)."""
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def url_host(self) -> str:
        """The host as it appears in a URL: ``0.0.0.0`` means "here" to a client."""
        if self.host in ("0.0.0.0", ""):
            return "127.0.0.1"
        if self.host == "::":
            return "[::1]"
        try:
            if ipaddress.ip_address(self.host).version == 6:
                return f"[{self.host}]"
        except ValueError:
            pass
        return self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ReverseTarget:
    """``--reverse NAME=URL@PORT``: plain HTTP on PORT, forwarded to URL, for clients that
    take a base URL but cannot use a proxy or trust a CA."""

    name: str
    url: str
    port: int

    @classmethod
    def parse(cls, value: str) -> ReverseTarget:
        name, sep, rest = value.strip().partition("=")
        url, at, port_text = rest.rpartition("@")
        what = f"reverse target {value!r}"
        if not sep or not at or not _NAME.fullmatch(name):
            raise ValueError(
                f"{what}: expected NAME=URL@PORT, e.g. openai=https://api.openai.com@8082"
            )
        parts = urlsplit(url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
        ):
            raise ValueError(f"{what}: URL must be http(s)://host[:port] with no path")
        port = Address.parse(port_text, what).port
        return cls(name, f"{parts.scheme}://{parts.netloc}", port)

    def __str__(self) -> str:
        return f"{self.name}={self.url}@{self.port}"


@dataclass(frozen=True, slots=True)
class UpstreamProxy:
    """``--upstream-proxy``: every forwarded request leaves through this proxy."""

    url: str  # scheme://host:port, without credentials
    auth: str | None  # "user:password" for Proxy-Authorization, never logged

    @classmethod
    def parse(cls, value: str) -> UpstreamProxy:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "upstream proxy: expected http(s)://[user:password@]host:port, "
                f"got {_masked(value)!r}"
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"upstream proxy {_masked(value)!r}: bad port") from None
        auth = None
        if parts.username is not None:
            auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return cls(f"{parts.scheme}://{host}:{port}", auth)

    def with_credentials(self) -> str:
        """The URL with its credentials, for a client that sends them itself (httpx)."""
        if self.auth is None:
            return self.url
        scheme, _, rest = self.url.partition("://")
        user, _, password = self.auth.partition(":")
        return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{rest}"


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


@dataclass(frozen=True, slots=True)
class Settings:
    mode: Mode = Mode.RECORD
    cassette: str = "default"
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    store: str = ""
    blobs: str | None = None
    """``--blobs``: the object store bodies are kept in (storage.objects); None: the store."""
    listen: Address = Address("127.0.0.1", 8080)
    admin: Address = Address("127.0.0.1", 8081)
    upstream_ca: Path | None = None
    replay_pace: float = RECORDED_PACE
    rules: Path | None = None
    reverse: tuple[ReverseTarget, ...] = ()
    upstream_proxy: UpstreamProxy | None = None
    redact_headers: tuple[str, ...] = ()
    redact_patterns: tuple[str, ...] = ()
    annotate: bool = False
    miss_details: bool = False
    """``--miss-details``: miss answers quote the nearest recording's differing values."""
    fresh: bool = False
    """Empty the default cassette before recording into it."""
    live: tuple[Route, ...] = ()
    """``--live``: in replay, these requests go upstream for real (addons.routing)."""
    record_into: str | None = None
    """``--record-into``: in replay, where the new run (live and replayed) is recorded."""
    after_miss: str = "miss"
    """``--after-miss``: ``miss``, or ``live``: live routes replay until the run misses."""
    live_upstream: tuple[str, str, int] | None = None
    """``recheck --live --model-url``: where live routes go instead (scheme, host, port)."""
    replay_session: str | None = None
    """``--replay-session``: replay positions counted in the store, shared by replicas."""
    max_age: float | None = None
    """``--max-age``: seconds after its last exchange that a cassette is removed."""
    durability: str = "batched"
    """``--durability``: ``batched``, or ``strict``: an answer ends once it is committed."""
    store_writer: str = "process"
    """``--store-writer``: ``process`` (Linux; elsewhere a thread), or ``thread``: where the
    store's writes run (storage.sql.writerprocess)."""
    perturb: tuple[Perturbation, ...] = ()
    """``--perturb``: in replay, recorded answers changed by seeded rolls (whatif.perturb)."""
    seed: int | None = None
    """``--seed``: the rolls' seed; None: one is drawn at start, and logged."""
    admin_token: str | None = field(default=None, repr=False)
    """``--admin-token``: every admin route but /health and /ca.pem asks for it."""
    admin_hosts: tuple[str, ...] = ()
    """``--admin-host``: more names the admin port answers to (``Host``), beside its address
    and the loopback names."""
    admin_trusted_proxies: tuple[str, ...] = ()
    """``--admin-trusted-proxy``: addresses (or networks) of reverse proxies in front of the
    admin port whose ``X-Forwarded-For`` names the client; from anyone else it is ignored,
    so a guesser cannot pick a new address for every wrong token."""

    @property
    def store_url(self) -> str:
        return self.store or default_store_url(self.data_dir)

    @property
    def writer_at_first_write(self) -> bool:
        """Whether the store's writer starts with the first write rather than before the
        proxy serves: a replay writes only what it notes (misses, drift), so its writer
        process is not started before the first answer (#30); ``--record-into`` writes
        every answer, and the other modes record."""
        return self.mode is Mode.REPLAY and self.record_into is None

    @property
    def outbox(self) -> Path:
        """Where bodies wait while the object store (--blobs) is away."""
        return self.data_dir / OUTBOX_DIRNAME

    @property
    def ca_path(self) -> Path:
        return self.data_dir / CA_FILENAME


def parse_model_url(value: str) -> tuple[str, str, int]:
    """``--model-url``: ``http[s]://HOST[:PORT]``, the scheme, host and port model calls go
    to instead of the recorded upstream; their paths stay as the client sent them."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--model-url {value!r}: expected http[s]://HOST[:PORT]")
    if parts.path not in ("", "/") or parts.query or parts.username:
        raise ValueError(
            f"--model-url {value!r}: give only scheme, host and port; "
            "the calls keep the paths the agent sends"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"--model-url {value!r}: the port is not a number") from None
    return parts.scheme, parts.hostname, port


def parse_live(value: str) -> Route:
    """``HOST[:PORT][/PATH-GLOB]``: a host glob, a port if given, and a path glob (every
    path when left out)."""
    text = value.strip()
    if "://" in text:
        raise ValueError(f"--live {value!r}: give HOST[:PORT][/PATH-GLOB], without a scheme")
    where, slash, path = text.partition("/")
    host, colon, port_text = where.rpartition(":") if ":" in where else (where, "", "")
    if not host or any(c in host for c in " ?#@[]") or (colon and not port_text.isdigit()):
        raise ValueError(
            f"--live {value!r}: expected HOST[:PORT][/PATH-GLOB], e.g. api.openai.com/v1/*"
        )
    from freezeframe.canonicalize import Route

    return Route(
        number=0,
        host=host.lower(),
        path=f"/{path}" if slash else "*",
        mode="record",
        port=int(port_text) if colon else None,
    )


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: str, what: str) -> float:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w``: seconds."""
    found = _DURATION.fullmatch(value.strip().lower())
    if found is None or float(found.group(1)) <= 0:
        raise ValueError(f"{what} {value!r}: expected a duration such as 30d, 12h or 15m")
    return float(found.group(1)) * _UNITS[found.group(2)]


def _durability(value: str) -> str:
    choice = value.strip().lower()
    if choice not in ("batched", "strict"):
        raise ValueError(f"--durability {value!r}: choose batched or strict")
    return choice


def _store_writer(value: str) -> str:
    choice = value.strip().lower()
    if choice not in ("process", "thread"):
        raise ValueError(f"--store-writer {value!r}: choose process or thread")
    return choice


def _seed(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"--seed {value!r}: expected a whole number, e.g. 7") from None


def _session(value: str) -> str:
    if not _NAME.fullmatch(value.strip()):
        raise ValueError(
            f"--replay-session {value!r}: letters, digits, '.', '_' and '-', at most 64"
        )
    return value.strip()


def _after_miss(value: str, live: tuple[str, ...]) -> str:
    choice = value.strip().lower()
    if choice not in ("miss", "live"):
        raise ValueError(f"--after-miss {value!r}: choose miss or live")
    if choice == "live" and not any(item.strip() for item in live):
        raise ValueError(
            "--after-miss live forwards --live routes after a miss; name them with --live"
        )
    return choice


def check_admin_token(value: str | None, admin: Address) -> str | None:
    """The admin token, required when ``--admin`` is reachable from other machines."""
    token = value.strip() if value else None
    if token is None and not admin.is_loopback:
        raise ValueError(
            f"--admin {admin} is reachable from other machines: set --admin-token "
            f"(FREEZEFRAME_ADMIN_TOKEN) to a secret of at least {MIN_TOKEN_LENGTH} characters, "
            "or bind --admin to 127.0.0.1"
        )
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"--admin-token is {len(token)} characters; use at least {MIN_TOKEN_LENGTH} "
            "(e.g. openssl rand -hex 32)"
        )
    return token


def check_admin_host(value: str) -> str:
    """``--admin-host NAME``: a host name or address, as a ``Host`` header carries it
    (without the port; IPv6 in brackets)."""
    name = value.strip().lower()
    bare = name.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        if not _HOST_NAME.fullmatch(name):
            raise ValueError(
                f"--admin-host {value!r}: expected a host name or address without a port, "
                "e.g. freezeframe"
            ) from None
        return name.rstrip(".")
    return f"[{bare}]" if address.version == 6 else bare


def check_trusted_proxy(value: str) -> str:
    """``--admin-trusted-proxy ADDR``: an IP address or network (CIDR), as uvicorn's
    ``forwarded_allow_ips`` takes it; ``*`` is refused, since it trusts every client."""
    text = value.strip()
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise ValueError(
            f"--admin-trusted-proxy {value!r}: expected an IP address or network of the "
            "reverse proxy in front of the admin port, e.g. 10.0.0.7 or 10.0.0.0/24"
        ) from None


def check_certificates(path: Path, what: str) -> None:
    """Refuse a file that is not one or more PEM certificates, naming it and what is wrong:
    mitmproxy would otherwise start and fail every upstream handshake later."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    from cryptography import x509

    try:
        with warnings.catch_warnings():  # cryptography's notes on odd but usable certificates
            warnings.simplefilter("ignore")
            x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ValueError(
            f"{what} {str(path)!r}: not PEM certificates (expected -----BEGIN CERTIFICATE-----)"
        ) from None


def default_store_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / DB_FILENAME).absolute()}"


def open_existing(data_dir: str | Path, store: str | None, blobs: str | None = None) -> Store:
    """The store a command reads (``store``, else the one in ``data_dir``), which must exist:
    a mistyped --data-dir says so instead of creating an empty store and listing nothing. Use
    it as a context manager: the store closes however the command ends. ``blobs``: the
    object store its bodies are in (--blobs), its outbox in the data dir."""
    from freezeframe.storage import StoreNotFound, open_store

    try:
        data = Path(data_dir).expanduser()
        return open_store(
            store or default_store_url(data),
            create=False,
            blobs=blobs,
            outbox=data / OUTBOX_DIRNAME,
        )
    except StoreNotFound as exc:
        raise StoreNotFound(f"{exc}; pass --data-dir or --store") from None


def build(
    *,
    mode: str,
    cassette: str,
    data_dir: str,
    store: str | None,
    listen: str,
    admin: str,
    upstream_ca: str | None,
    blobs: str | None = None,
    replay_pace: str = "recorded",
    rules: str | None = None,
    reverse: tuple[str, ...] = (),
    upstream_proxy: str | None = None,
    redact_headers: tuple[str, ...] = (),
    redact_patterns: tuple[str, ...] = (),
    annotate: bool = False,
    miss_details: bool | None = None,
    fresh: bool = False,
    live: tuple[str, ...] = (),
    record_into: str | None = None,
    after_miss: str = "miss",
    replay_session: str | None = None,
    max_age: str | None = None,
    durability: str = "batched",
    store_writer: str = "process",
    perturb: str | None = None,
    seed: str | None = None,
    admin_token: str | None = None,
    admin_hosts: tuple[str, ...] = (),
    admin_trusted_proxies: tuple[str, ...] = (),
) -> Settings:
    """Validate every setting; raise ``ValueError`` naming the setting and the value."""
    from freezeframe.proxy.keys import key_config, rules_path
    from freezeframe.whatif.perturb import parse_spec

    ca = Path(upstream_ca).expanduser() if upstream_ca else None
    if ca is not None:
        check_certificates(ca, "upstream CA")
    data = Path(data_dir).expanduser()
    parsed_mode = Mode.parse(mode)
    if fresh and parsed_mode not in (Mode.RECORD, Mode.AUTO):
        raise ValueError(
            f"--fresh empties the cassette to record it again; it means nothing in "
            f"{parsed_mode.value} mode (use record or auto)"
        )
    if perturb and parsed_mode in (Mode.RECORD, Mode.PASSTHROUGH):
        raise ValueError(
            f"--perturb changes replayed answers; it means nothing in {parsed_mode.value} "
            "mode (use replay or auto)"
        )
    admin_address = Address.parse(admin, "admin address")
    rules_file = rules_path(rules, data)
    if rules_file is not None:
        key_config(rules_file)  # refuse a bad rules file at start, naming the line
    return Settings(
        mode=parsed_mode,
        cassette=validate_cassette_name(cassette),
        data_dir=data,
        store=store or "",
        blobs=blobs or None,
        listen=Address.parse(listen, "listen address"),
        admin=admin_address,
        upstream_ca=ca,
        replay_pace=parse_pace(replay_pace),
        rules=rules_file,
        reverse=tuple(ReverseTarget.parse(r) for r in reverse if r.strip()),
        upstream_proxy=UpstreamProxy.parse(upstream_proxy) if upstream_proxy else None,
        redact_headers=tuple(h for h in redact_headers if h),
        redact_patterns=tuple(p for p in redact_patterns if p),
        annotate=annotate,
        miss_details=bool(miss_details),
        fresh=fresh,
        live=tuple(parse_live(value) for value in live if value.strip()),
        record_into=validate_cassette_name(record_into) if record_into else None,
        after_miss=_after_miss(after_miss, live),
        replay_session=_session(replay_session) if replay_session else None,
        max_age=parse_duration(max_age, "--max-age") if max_age else None,
        durability=_durability(durability),
        store_writer=_store_writer(store_writer),
        perturb=parse_spec(perturb) if perturb else (),
        seed=_seed(seed) if seed else None,
        admin_token=check_admin_token(admin_token, admin_address),
        admin_hosts=tuple(check_admin_host(name) for name in admin_hosts if name.strip()),
        admin_trusted_proxies=tuple(
            check_trusted_proxy(value) for value in admin_trusted_proxies if value.strip()
        ),
    )
