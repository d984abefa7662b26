"""The process: settings, the mitmproxy master and the admin server wired on one event loop,
and what ``exec`` needs around a command (its sandbox, clock and trust)."""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")
