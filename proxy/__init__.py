"""The process: settings, the mitmproxy master and the admin server wired on one event loop,
and what ``exec`` needs around a command (its sandbox, clock and trust)."""
