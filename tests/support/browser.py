"""A real browser for the case file's tests: Debian's chromium driven by Playwright.

Playwright's own browser download cannot be reached here (nor in CI), so the tests launch the
system's ``/usr/bin/chromium`` (``apt-get install chromium``, done by ``.ci/run``) through
``executable_path``, and skip, saying why, where it is missing. A test that fails leaves a
screenshot of its page under ``test-artifacts/casefile/`` (see ``screenshot_on_failure``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

PHASE_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
"""Each phase's report of a test, kept by tests/conftest.py's makereport hook."""
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts" / "casefile"


#: CI sets this, so that a browser test never passes by skipping where CI installed none.
REQUIRE_BROWSER = os.environ.get("FREEZEFRAME_REQUIRE_BROWSER") == "1"


def chromium_or_skip() -> str:
    found = shutil.which(CHROMIUM) or shutil.which("chromium")
    if found is None:
        reason = "no chromium: apt-get install chromium (as .ci/run does)"
        if REQUIRE_BROWSER:
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def failed(item: pytest.Item) -> bool:
    reports = item.stash.get(PHASE_REPORTS, {})
    return any(report.failed for report in reports.values())


def artifact_path(item: pytest.Item) -> Path:
    """Where a failing test's screenshot goes: one file per test, named after it."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name) + ".png")


_OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth <= width) return [];
  const past = (el) => el && el.getBoundingClientRect().right > width + 0.5;
  const named = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (past(el) && !past(el.parentElement) && named.length < 10) {
      const text = (el.textContent || "").trim().slice(0, 60);
      const classes = [...el.classList].map((c) => "." + c).join("");
      const right = Math.round(el.getBoundingClientRect().right);
      named.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${classes}` +
        ` (right ${right} px): ${text}`);
    }
  }
  return named.length ? named : [`the page is ${document.documentElement.scrollWidth} px wide`];
}"""


def overflowing(page: Page) -> list[str]:
    """What makes the page scroll sideways at its viewport's width: the outermost elements
    that stick out past the right edge (empty when the page fits). A ``pre`` that scrolls
    inside itself does not count; a page a phone must pan across does."""
    found: list[str] = page.evaluate(_OVERFLOWING)
    return found
