"""``freezeframe exec``: a command run through an embedded proxy, in a network namespace of
its own where asked, at its recording's time where asked, and ``triage recheck`` on top of it.
The process package (``proxy``) knows nothing of it."""
