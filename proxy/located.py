"""Which store a command reads: the one it was given, else the running proxy's, else the
default data dir's.

Run from the agent's directory, the default ``./.freezeframe`` is another store than the
running proxy's (or none), so a reader that was given neither ``--data-dir`` nor ``--store``
asks the proxy at ``FREEZEFRAME_ADMIN`` which store it writes, and says so when a store here
would have been read otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from freezeframe.proxy import settings
from freezeframe.storage import CassetteNotFound, Store, StoreError, StoreNotFound, open_store
from freezeframe.storage.names import closest_names


@dataclass(frozen=True, slots=True)
class Located:
    """The data dir and store URL a command uses; ``home``: the data dir the command was
    given (or its default), where a reader's outbox is; ``running``: whether the store is
    the running proxy's, taken instead of the one in ``home``."""

    data_dir: Path
    url: str
    home: Path
    running: bool = False

    def open(self, blobs: str | None) -> Store:
        """The store, which must exist (a mistyped --data-dir says so instead of making an
        empty store and listing nothing); a context manager, closed however the command
        ends. ``blobs``: the object store its bodies are in (--blobs)."""
        return settings.open_existing(self.home, self.url, blobs)

    def open_or_make(self, blobs: str | None) -> tuple[Store, bool]:
        """The store, made when there is none (``import``); and whether it was made."""
        outbox = self.data_dir / settings.OUTBOX_DIRNAME
        try:
            return open_store(self.url, create=False, blobs=blobs, outbox=outbox), False
        except StoreNotFound:
            return open_store(self.url, blobs=blobs, outbox=outbox), True


def locate(data_dir: str, store: str | None, given: bool, note: Callable[[str], None]) -> Located:
    """Those ``given`` (flag or variable); else the running proxy's, when one answers at
    FREEZEFRAME_ADMIN (``note`` says which is read when a store here is passed over); else
    the default data dir's."""
    directory = Path(data_dir).expanduser()
    if given:
        return Located(directory, store or settings.default_store_url(directory), directory)
    from freezeframe.proxy.discovery import store_of_running

    admin = os.environ.get("FREEZEFRAME_ADMIN") or settings.DEFAULT_ADMIN
    address = settings.Address.parse(admin, "FREEZEFRAME_ADMIN")
    found = store_of_running(address, os.environ.get("FREEZEFRAME_ADMIN_TOKEN"))
    if found is None:
        return Located(directory, store or settings.default_store_url(directory), directory)
    if local_store(directory, found.url) is not None:  # two stores: say which is read
        note(f"reading the store of the proxy at {found.admin}: {found.url}")
    return Located(found.data_dir, found.url, directory, running=True)


def local_store(directory: Path, other: str) -> str | None:
    """The URL of the store in ``directory`` (the default ./.freezeframe) when it exists and
    is not ``other``, the running proxy's: only then is which one a command reads news."""
    path = directory / settings.DB_FILENAME
    url = settings.default_store_url(directory)
    if not path.is_file() or url == other or path.resolve() == _sqlite_path(other):
        return None
    return url


def _sqlite_path(url: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(url[len(prefix) :]).resolve() if url.startswith(prefix) else None


def suggestion(located: Located, missing: CassetteNotFound) -> str:
    """For a cassette the store does not hold, the names it does hold that are closest
    (``show orderz``: did you mean 'orders'?), as the proxy says at start; or the store
    passed over, when that one holds it."""
    passed_over = located.home
    elsewhere = local_store(passed_over, located.url) if located.running else None
    try:
        if elsewhere is not None:
            with open_store(elsewhere, create=False) as store:
                if store.has_cassette(missing.cassette):
                    return (
                        f", the running proxy's; {passed_over}/ here holds {missing.cassette!r}: "
                        f"pass --data-dir {passed_over} to read that store"
                    )
        with open_store(located.url, create=False) as store:
            close = closest_names(missing.cassette, store.cassette_names())
    except StoreError:
        return ""
    return f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
