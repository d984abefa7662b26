"""Every request no other profile recognises, keyed by its body as read.

Nothing is dropped but the configured volatile fields, because nothing is known about what
the fields of an unknown API mean.
"""

from .profile import Profile

_GENERIC = {
    kind: Profile(f"generic.{kind}") for kind in ("empty", "json", "form", "multipart", "bytes")
}


def generic_profile(body_kind: str) -> Profile:
    """The generic profile, named for how the body was read, so explain shows that too."""
    return _GENERIC[body_kind]
