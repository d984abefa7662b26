"""``--clock``: what it accepts, and the one line when libfaketime is not there."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from freezeframe.sandbox import clock
from freezeframe.sandbox.clock import Clock, ClockUnavailable, FakedClock


def test_a_time_without_an_offset_is_local_and_one_with_an_offset_is_kept() -> None:
    assert Clock.parse("recorded") == Clock(None)
    assert Clock.parse("2024-02-29T23:59:30Z").moment == datetime(
        2024, 2, 29, 23, 59, 30, tzinfo=UTC
    )
    local = Clock.parse("2024-02-29T23:59:30").moment
    assert local is not None and local.tzinfo is not None
    assert local.replace(tzinfo=None) == datetime(2024, 2, 29, 23, 59, 30)


def test_without_libfaketime_the_clock_is_refused_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(clock, "LIBRARY_GLOBS", (str(tmp_path / "*" / "libfaketime.so.1"),))
    with pytest.raises(ClockUnavailable, match=r"apt-get install libfaketime"):
        clock.library()


def test_the_command_keeps_its_own_preloads_after_libfaketime() -> None:
    faked = FakedClock(datetime(2024, 2, 29, tzinfo=UTC), Path("/lib/libfaketime.so.1"))
    env = faked.environment("/lib/other.so")
    assert env["LD_PRELOAD"] == "/lib/libfaketime.so.1 /lib/other.so"
    assert env["FAKETIME"].startswith("@")
    assert env["FAKETIME_DONT_RESET"] == "1"
