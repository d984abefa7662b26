"""The runtime state's journal: what the proxy did with each request, numbered."""

from __future__ import annotations

import pytest

from freezeframe.addons import state
from freezeframe.addons.state import Journal


def test_the_journal_numbers_events_and_keeps_the_latest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "JOURNAL_KEPT", 3)
    journal = Journal()
    for n in range(5):
        journal.add("hit", "c", n, "GET", f"https://tools.local/{n}", drift=("$.user",) * (n % 2))

    assert journal.last == 5
    assert [event.n for event in journal.after(0)] == [3, 4, 5]
    assert [event.seq for event in journal.after(4)] == [4]
    assert journal.after(4)[0].document()["drift"] == []
    assert journal.after(3)[0].document()["drift"] == ["$.user"]
