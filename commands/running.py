"""The commands for a proxy that is already running: the environment a client needs
(``env``), the CA it must trust (``ca``), and replay from the top (``replay-reset``).

Each asks the proxy's admin API (``proxy.discovery``), so it works from any directory.
"""

from __future__ import annotations

from pathlib import Path

import click

from freezeframe.commands.context import user_set
from freezeframe.commands.options import ADMIN_TOKEN, debug_option, setting
from freezeframe.proxy import settings as settings_module

SHELLS = ("sh", "fish", "dotenv")
"""The values of ``env --shell`` (``sandbox.wiring`` renders each)."""


@click.command()
@click.option(
    "--shell",
    type=click.Choice(SHELLS),
    default="sh",
    show_default=True,
    help="sh (export lines), fish (set -gx), or dotenv (an env_file for docker compose).",
)
@setting(
    "--admin",
    "Admin API of the running proxy (asked where it listens and where its CA is).",
    default=settings_module.DEFAULT_ADMIN,
)
@setting(
    "--data-dir",
    "Use the CA in this directory instead of the one the running proxy names.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="Wait up to SECONDS for a proxy that is still starting (`run ... &` just before).",
)
@ADMIN_TOKEN
@debug_option
def env(shell: str, admin: str, data_dir: str, admin_token: str | None, wait: float) -> None:
    """Print the environment lines a client needs for a running proxy.

    The proxy's address and its CA come from the proxy itself (its admin API), so this
    works from any directory.

    \b
    Example:
        eval "$(freezeframe env)"
        freezeframe run --mode record --cassette first-run &
        eval "$(freezeframe env --wait 30)"
        freezeframe env --shell fish | source
        freezeframe env --shell dotenv > agent.env
    """
    from freezeframe.sandbox.wiring import running_environment

    explicit = Path(data_dir).expanduser() if user_set("data_dir") else None
    click.echo(running_environment(admin, admin_token, wait, explicit, shell), nl=False)


@click.command()
@click.option(
    "--bundle",
    is_flag=True,
    help="Print a bundle of the system's CAs plus freezeframe's (for SSL_CERT_FILE).",
)
@setting(
    "--admin",
    "Admin API of the running proxy, asked where its CA is.",
    default=settings_module.DEFAULT_ADMIN,
)
@setting(
    "--data-dir",
    "Use the CA in this directory instead of asking the running proxy.",
    default=settings_module.DEFAULT_DATA_DIR,
)
@ADMIN_TOKEN
@debug_option
def ca(bundle: bool, admin: str, data_dir: str, admin_token: str | None) -> None:
    """Print the path of the CA certificate clients must trust.

    The running proxy (at --admin) says where its CA is; with no proxy running, the CA
    in the default data dir is used. An explicit --data-dir wins. Nothing is created:
    a proxy makes its CA when it first starts.

    \b
    Example:
        export SSL_CERT_FILE=$(freezeframe ca --bundle)
    """
    from freezeframe.proxy.discovery import client_trust

    explicit = Path(data_dir).expanduser() if user_set("data_dir") else None
    address = settings_module.Address.parse(admin, "admin address")
    trust = client_trust(address, explicit, Path(settings_module.DEFAULT_DATA_DIR), admin_token)
    click.echo(str(trust.bundle if bundle else trust.ca))


@click.command(name="replay-reset")
@setting("--admin", "Admin API of the running proxy.", default=settings_module.DEFAULT_ADMIN)
@ADMIN_TOKEN
@debug_option
def replay_reset(admin: str, admin_token: str | None) -> None:
    """Tell a running proxy to start replay from the top (POST /api/replay/reset).

    Replay serves the n-th request with a key the n-th recording of it; running the
    agent again against the same proxy needs the count to start over.

    \b
    Example:
        freezeframe replay-reset --admin 127.0.0.1:8081
    """
    from freezeframe.proxy.discovery import reset_replay

    mode = reset_replay(admin, admin_token)
    click.echo(f"replay starts from the top (mode {mode['mode']}, cassette {mode['cassette']!r})")
