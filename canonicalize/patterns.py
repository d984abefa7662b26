"""Patterns users write (rules' substitutions), compiled so that no text can make them slow.

A rule runs on every string of every request, so a backtracking engine would let one pattern
(``(a+)+$``) hold the proxy for minutes on one body. RE2 matches in time linear in the text,
whatever the pattern; what it cannot do in linear time (lookaround, backreferences) it
refuses, and that refusal is the error a rules file gets when it is read.
"""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print its own copy of the error to stderr
_UNSUPPORTED = ("invalid perl operator", "invalid escape sequence")
"""How RE2 refuses what a backtracking engine would take: lookaround, backreferences."""


def linear_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ValueError, saying why, if RE2 refuses it."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as error:
        reason = str(error.args[0].decode() if isinstance(error.args[0], bytes) else error)
        if reason.startswith(_UNSUPPORTED):
            reason += " (patterns run on RE2, in linear time: no lookaround, no backreferences)"
        raise ValueError(reason) from None
