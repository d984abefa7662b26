"""The 95 % Wilson interval recheck --live gives each run and the group."""

import pytest

from freezeframe.sandbox.recheck import (
    DIVERGED,
    FIXED,
    FLAKY,
    STILL_FAILING,
    LiveRunCheck,
    Tally,
    Try,
    wilson,
)


@pytest.mark.parametrize(
    ("passed", "tries", "low", "high"),
    [
        # Published values (Wilson 1927; Newcombe 1998, table I: 81/263 -> 0.2553-0.3662).
        (81, 263, 0.2553, 0.3662),
        (5, 5, 0.5655, 1.0),
        (0, 5, 0.0, 0.4345),
        (3, 10, 0.1078, 0.6032),
    ],
)
def test_wilson_matches_the_published_intervals(
    passed: int, tries: int, low: float, high: float
) -> None:
    found = wilson(passed, tries)
    assert found == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def test_nothing_tried_says_nothing() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert Tally(0, 0).flip_rate == 0.0


def _try(number: int, passed: bool, unanswered: tuple[str, ...] = ()) -> Try:
    return Try(number, passed, 0 if passed else 1, f"c.try-{number}", 2, unanswered)


def test_verdicts() -> None:
    assert LiveRunCheck("r", (_try(1, True), _try(2, True))).verdict == FIXED
    assert LiveRunCheck("r", (_try(1, True), _try(2, False))).verdict == FLAKY
    assert LiveRunCheck("r", (_try(1, False), _try(2, False))).verdict == STILL_FAILING
    diverged = LiveRunCheck("r", (_try(1, True), _try(2, False, ("GET https://t/refunds/4",))))
    assert diverged.verdict == DIVERGED
    assert diverged.diverged == ("GET https://t/refunds/4",)
