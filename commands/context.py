"""What a command was given, kept where every helper of the command finds it.

The store options (``--data-dir``, ``--store``, ``--blobs``) and ``--debug`` keep their values
in click's context (``ctx.meta``) instead of being handed down, so that ``open_store()`` and
the group's error handling (``cli.FreezeframeGroup``) read them without each command passing
them on. Where the store is, is worked out once per command (``proxy.located``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from freezeframe.commands.output import inform

if TYPE_CHECKING:
    from freezeframe.proxy.located import Located
    from freezeframe.storage import Store


def remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep an option's value where every helper of the command finds it (ctx.meta)."""
    ctx.meta[f"freezeframe.{param.name}"] = value
    return value


def option_value(name: str) -> Any:
    """The value ``remember`` kept for option ``name``; None when the command has no such option."""
    return click.get_current_context().meta.get(f"freezeframe.{name}")


def debugging() -> bool:
    """Whether ``--debug`` was given: tracebacks and debug logs."""
    return bool(option_value("debug"))


def user_set(name: str) -> bool:
    """Whether the user set option ``name`` (flag or variable) rather than its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def given_blobs() -> str | None:
    """The object store the command was given for bodies (--blobs); None: none."""
    return option_value("blobs") or None


def located() -> Located:
    """The data dir and store URL the command uses (proxy.located.locate), worked out once."""
    from freezeframe.proxy.located import locate

    meta = click.get_current_context().meta
    if "freezeframe.located" not in meta:
        given = user_set("data_dir") or user_set("store")
        found = locate(meta["freezeframe.data_dir"], meta["freezeframe.store"], given, inform)
        meta["freezeframe.located"] = found
    place: Located = meta["freezeframe.located"]
    return place


def open_store() -> Store:
    """The store the command reads, which must exist; a context manager."""
    return located().open(given_blobs())
