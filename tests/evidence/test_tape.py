"""A strict tape read from what was recorded and what was served, in order."""

from freezeframe.evidence.tape import Recorded, read_tape

RECORDED = [Recorded(0, "GET", "https://t/look"), Recorded(1, "DELETE", "https://t/rec/7")]


def test_a_call_never_asked_for_is_unused_and_fails_only_under_strict() -> None:
    tape = read_tape("c", RECORDED, [0])
    assert tape.unused == (RECORDED[1],)
    assert tape.out_of_order == ()
    assert tape.failed(strict=True) and not tape.failed(strict=False)
    assert tape.lines(strict=False) == []
    assert tape.lines(strict=True) == ["c: recorded but never asked for: #1 DELETE https://t/rec/7"]


def test_answers_out_of_recorded_order_are_reported_whatever_strict_says() -> None:
    tape = read_tape("c", RECORDED, [1, 0, 5])  # 5: another cassette's, not this tape's
    assert tape.unused == ()
    assert [(e.exchange.seq, e.after) for e in tape.out_of_order] == [(0, 1)]
    assert tape.lines(strict=False) == [
        "c: answered out of recorded order: #0 GET https://t/look (after #1)"
    ]
    assert tape.failed(strict=True)
