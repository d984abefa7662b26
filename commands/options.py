"""The options several commands share, declared once: the store's, the proxy's settings,
the exchange filters, ``--json``, ``--rules``, ``--admin-token`` and ``--debug``.

An option backed by a ``FREEZEFRAME_*`` variable is a ``setting``, so its variable is shown
in ``--help`` as docs/settings.md's table says. Arguments click cannot check itself are
read inside ``usage()``, so a mistake in them is a usage error (exit 2), as click's own are.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from freezeframe.commands.context import remember
from freezeframe.proxy import settings as settings_module
from freezeframe.proxy.flags import RUN_FLAGS
from freezeframe.storage import ExchangeFilter


def usage_error(message: str) -> click.UsageError:
    """A mistake in how a command was called (exit 2, as click's own), not in what it read."""
    return click.UsageError(message, click.get_current_context(silent=True))


@contextlib.contextmanager
def usage() -> Iterator[None]:
    """Arguments that click cannot check itself (``--set``, ``--header``, ``--url``, a
    duration): a ValueError while reading them is a usage error."""
    try:
        yield
    except ValueError as exc:
        raise usage_error(str(exc)) from None


class Separated(click.types.StringParamType):
    """A repeatable option whose environment variable separates values with ``sep``
    (click would split on whitespace, which breaks regexes with spaces). click's own
    ``envvar_list_splitter`` is one per class; the separator is one per option."""

    def __init__(self, sep: str) -> None:
        self.sep = sep

    def split_envvar_value(self, rv: str) -> Sequence[str]:
        return (rv or "").split(self.sep)


def debug_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Show tracebacks and debug logs.",
    )(f)


def setting(
    flag: str, help: str, *names: str, **kwargs: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An option backed by its ``FREEZEFRAME_*`` variable, as the contract's table says."""
    kwargs.setdefault("envvar", "FREEZEFRAME_" + flag.lstrip("-").replace("-", "_").upper())
    kwargs.setdefault("show_default", kwargs.get("default") is not None)
    return click.option(flag, *names, show_envvar=True, help=help, **kwargs)


def store_options(f: Callable[..., Any], expose: bool = False) -> Callable[..., Any]:
    """--data-dir, --store and --blobs, kept where every store the command opens finds them
    (context.located, context.given_blobs); given to the command as well when ``expose``
    (run, exec)."""
    f = setting(
        "--blobs",
        "Object store for bodies: s3://BUCKET[/PREFIX] (endpoint and credentials from AWS_*).",
        metavar="URL",
        expose_value=False,
        callback=remember,
    )(f)
    f = setting(
        "--store",
        "SQLAlchemy URL of the store  [default: sqlite:///<data dir>/freezeframe.db]",
        metavar="URL",
        expose_value=expose,
        callback=remember,
    )(f)
    return setting(
        "--data-dir",
        "Where the CA, the secret key and the default store live.",
        default=settings_module.DEFAULT_DATA_DIR,
        expose_value=expose,
        callback=remember,
    )(f)


JSON = click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
RULES = setting(
    "--rules", "Key rules (TOML)  [default: <data dir>/rules.toml if it exists]", metavar="FILE"
)
ADMIN_TOKEN = setting(
    "--admin-token",
    "The running proxy's admin token, if it has one (prefer the variable: flags show in ps).",
    metavar="TOKEN",
)
"""How ``env``, ``ca`` and ``replay-reset`` prove themselves to a proxy with a token."""


def check_mode(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A mode that is not one is a usage error (exit 2), as a misspelt flag is."""
    from freezeframe.addons.state import Mode

    try:
        Mode.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None
    return value


def run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The settings of a proxy (proxy.flags), shared by ``run`` and ``exec``."""
    for flag in reversed(RUN_FLAGS):
        names = [flag.name] if flag.name else []
        kwargs: dict[str, Any] = {"default": flag.default, "metavar": flag.metavar}
        if flag.envvar:
            kwargs["envvar"] = flag.envvar
        if flag.separator:
            kwargs.update(multiple=True, type=Separated(flag.separator))
        if flag.is_flag:
            kwargs["is_flag"] = True
        if flag.flag == "--mode":
            kwargs["callback"] = check_mode
        f = setting(flag.flag, flag.help, *names, **kwargs)(f)
    return store_options(f, expose=True)


def filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--run-id``, ``--model`` and ``--status``, handed to the command as ``where``."""

    @functools.wraps(f)
    def command(run_id: str | None, model: str | None, status: str | None, **kw: Any) -> Any:
        try:
            where = ExchangeFilter.parse(run_id, model, status)
        except ValueError as exc:
            raise usage_error(f"--{exc}") from None
        return f(where=where, **kw)

    command = click.option(
        "--status",
        metavar="STATUS",
        help="Only exchanges with this HTTP status (429) or outcome (truncated, failed, ...).",
    )(command)
    command = click.option(
        "--model", metavar="MODEL", help="Only exchanges that asked for or were answered by MODEL."
    )(command)
    return click.option(
        "--run-id", metavar="ID", help="Only exchanges sent with X-Freezeframe-Run-Id: ID."
    )(command)
