"""Recorded text made safe to print: no byte of it can command a terminal.

Everything recorded is hostile input: a header value, a body, a run id or a model name can
hold an escape sequence that retitles a terminal window, rewrites what is on screen, or
writes to the clipboard (OSC 52) when ``show`` prints it or a log line carries it. Control
characters (C0 but tab and newline, DEL, C1) are written as visible escapes (``\\x1b``), so
the text reads the same and does nothing.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def inert(text: str, *, newlines: bool = True) -> str:
    """``text`` with its control characters escaped; tabs and (unless ``newlines`` is
    False) newlines kept."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
