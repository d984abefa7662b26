"""What-if: a recording changed on purpose. Edits (``edit --set``) written back in the
recorded framing, perturbed answers, and answers resent live (``resend``) or keyed again
(``rekey``). Over the read model; knows nothing of mitmproxy or the process."""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")
