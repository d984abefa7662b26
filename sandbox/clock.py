"""``exec --clock``: run the command at the time its cassette was recorded.

An agent's "due today" logic reads the wall clock, so a replay on another day takes another
path than the recording did. libfaketime, preloaded into the command (``LD_PRELOAD``), makes
``time()``, ``gettimeofday()`` and ``clock_gettime(CLOCK_REALTIME)`` start at a given moment
and advance from there, for the command and every process it starts. Only the command gets
it: the proxy keeps the true time, which its certificates, its log and the store's record of
the run depend on. Monotonic clocks are left alone (they measure durations, and a client's
timeouts must keep working).

A program that does not call the C library for the time is out of reach: a statically linked
binary, and Go programs, which read the clock through the vDSO themselves.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509

from freezeframe.storage import ReadStore, Store

RECORDED = "recorded"
#: Where distributions install libfaketime (Debian and Ubuntu per architecture, Fedora's
#: lib64, a ``make install`` from source under /usr/local).
LIBRARY_GLOBS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
    "/usr/local/lib64/faketime/libfaketime.so.1",
)


#: How long before it was made a certificate of mitmproxy's is valid.
CERTIFICATE_MARGIN = timedelta(days=2)


class ClockUnavailable(ValueError):
    """The clock cannot be set as asked; the message is one line."""


@dataclass(frozen=True, slots=True)
class Clock:
    """What ``--clock`` asked for: the cassette's first request time, or a given moment."""

    moment: datetime | None
    """None: the recording's own time (``recorded``)."""

    @classmethod
    def parse(cls, value: str) -> Clock:
        """``recorded``, or an ISO 8601 time (``2024-02-29T23:59:30Z``); one without an
        offset is local time, as ``date`` would show it."""
        text = value.strip()
        if text.lower() == RECORDED:
            return cls(None)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ClockUnavailable(
                f"--clock {value!r}: expected recorded, or an ISO 8601 time such as "
                "2024-02-29T23:59:30Z"
            ) from None
        return cls(moment if moment.tzinfo else moment.astimezone())

    def start(self, store: ReadStore, cassette: str) -> datetime:
        """When the command's clock starts: the given moment, or the time of the first
        request recorded in ``cassette``."""
        if self.moment is not None:
            return self.moment
        for summary in store.cassettes():
            if summary.name == cassette and summary.first_at is not None:
                return datetime.fromtimestamp(summary.first_at, UTC)
        raise ClockUnavailable(
            f"--clock recorded: cassette {cassette!r} has no recorded request to take the "
            "time from; give --cassette, or a time"
        )


def library() -> Path:
    """The installed libfaketime, or :class:`ClockUnavailable` saying how to get it."""
    for pattern in LIBRARY_GLOBS:
        for found in sorted(glob.glob(pattern)):
            return Path(found)
    raise ClockUnavailable(
        "--clock needs libfaketime, which is not installed "
        "(Debian/Ubuntu: apt-get install libfaketime; Fedora: dnf install libfaketime)"
    )


@dataclass(frozen=True, slots=True)
class FakedClock:
    """The command's clock: starting at ``start``, through the libfaketime at ``library``."""

    start: datetime
    library: Path

    def environment(self, inherited_preload: str | None) -> dict[str, str]:
        """The variables that start the command's clock and let it advance.

        libfaketime reads an absolute start in the command's local time, so it is given
        that way; ``FAKETIME_DONT_RESET`` keeps one clock for the command's whole process
        tree instead of restarting it in every child.
        """
        local = datetime.fromtimestamp(self.start.timestamp())
        lib = str(self.library)
        return {
            "LD_PRELOAD": f"{lib} {inherited_preload}" if inherited_preload else lib,
            "FAKETIME": local.strftime("@%Y-%m-%d %H:%M:%S"),
            "FAKETIME_DONT_RESET": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


def trust_notice(start: datetime, ca: Path, own_proxy: bool) -> str | None:
    """Why a TLS client on a clock set to ``start`` would refuse the proxy, if it would.

    The proxy ``exec`` starts makes its certificates valid at ``start``, but the CA in the
    data dir was made when it was made; a running proxy (``--proxy``) made its certificates
    valid from shortly before now.
    """
    if not own_proxy:
        if start < datetime.now(UTC) - CERTIFICATE_MARGIN:
            return (
                f"--clock {start:%Y-%m-%d %H:%M:%S %Z}: the running proxy's certificates are "
                "not yet valid at that time, so TLS clients will refuse them; let exec start "
                "the proxy (drop --proxy)"
            )
        return None
    certificate = x509.load_pem_x509_certificate(ca.read_bytes())
    valid_from, valid_until = certificate.not_valid_before_utc, certificate.not_valid_after_utc
    if valid_from <= start <= valid_until:
        return None
    return (
        f"--clock {start:%Y-%m-%d %H:%M:%S %Z}: the CA {str(ca)!r} is valid from "
        f"{valid_from:%Y-%m-%d} to {valid_until:%Y-%m-%d}, so TLS clients will refuse the "
        "proxy at that time"
    )


def faked_clock(value: str, store: Callable[[], Store], cassette: str) -> FakedClock:
    """``--clock``: refused in one line without libfaketime, or without a time to start at;
    ``store`` opens the store to read ``cassette``'s first request time from (only for
    ``recorded``)."""
    wanted = Clock.parse(value)
    lib = library()
    if wanted.moment is not None:
        return FakedClock(wanted.moment, lib)
    with store() as opened:
        return FakedClock(wanted.start(opened, cassette), lib)
