"""Turn an HTTP request into a replay key, and explain why two requests' keys differ.

Pure by design: only the standard library and blake3, no I/O, no clock, so the same request
and options give the same key in every process and every version with the same SCHEME_VERSION.
"""

from .diff import differences, nearest
from .key import SCHEME_VERSION, canonicalize
from .model import Canonical, Difference, KeyConfig, RequestView, Stripped
from .volatile import DEFAULT_VOLATILE_FIELDS

__all__ = [
    "DEFAULT_VOLATILE_FIELDS",
    "SCHEME_VERSION",
    "Canonical",
    "Difference",
    "KeyConfig",
    "RequestView",
    "Stripped",
    "canonicalize",
    "differences",
    "nearest",
]
