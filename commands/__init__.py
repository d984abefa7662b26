"""The commands of the ``freezeframe`` command line, one module per job, as pip keeps its
own (``pip/_internal/commands/<command>.py``).

``start`` (run, exec, demo), ``running`` (env, ca, replay-reset), ``read`` (ls, show, search,
diff, verify, explain), ``files`` (export, import, keygen), ``edit`` (fork, edit, resend,
rekey, rules), ``store`` (rm, gc, blobs) and ``triage`` (triage, note, recheck) declare the
commands; ``options``, ``context`` and ``output`` are what they share. ``cli`` holds the
group that registers them and turns their failures into one line. A command parses its
arguments, calls the library functions that do its job and prints what they return.

Importing this package loads nothing: ``cli`` imports the modules.
"""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")
