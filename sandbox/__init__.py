"""``freezeframe exec``: a command run through an embedded proxy, in a network namespace of
its own where asked, at its recording's time where asked, and ``triage recheck`` on top of it.
The process package (``proxy``) knows nothing of it."""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")
