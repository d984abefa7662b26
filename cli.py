"""The ``freezeframe`` command line: the group, its failures, and the commands it holds.

Each command resolves settings (flag > environment variable > default), calls the library
functions that do its job, and prints what they return: a rich table or lines for people,
one JSON document on stdout for machines (``--json``). The commands are declared in
``commands``, one module per job; this module keeps what they all run inside: the group,
which turns every expected failure into one line on stderr with a non-zero exit
(``--debug`` shows the traceback), and the list of commands it holds.
"""

from __future__ import annotations

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

import os
import sys
from typing import Any, NoReturn

import click

from freezeframe.commands import edit, files, read, running, start, store, triage
from freezeframe.commands.output import fail
from freezeframe.storage import CassetteNotFound, StoreError
from freezeframe.storage.names import InvalidCassetteName

# Only what every command needs is imported here and by the command modules at their top:
# `--help`, `ls` and the other readers must answer at once, so the proxy engine (mitmproxy),
# the HTTP client, rich and the what-if machinery are imported inside the commands that use
# them.


class FreezeframeGroup(click.Group):
    """Turns every expected failure into one line on stderr, unless ``--debug``.

    A usage error (a bad argument, a missing file for an option) keeps click's exit code
    2, as POSIX tools do, but in the same one-line form as every other error.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() ends quietly
        except Exception as exc:
            if not isinstance(exc, _expected_failures()) or ctx.meta.get("freezeframe.debug"):
                raise
            located = ctx.meta.get("freezeframe.located")
            if not isinstance(exc, CassetteNotFound) or located is None:
                fail(str(exc))
            from freezeframe.proxy.located import suggestion

            fail(str(exc) + suggestion(located, exc))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            returned = super().main(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        except BrokenPipeError:
            _reader_gone()
        except (
            click.exceptions.NoArgsIsHelpError
        ) as exc:  # bare `freezeframe`: the usage, as git and pip print it
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            returned = 0
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "freezeframe"
            fail(f"{_sentence(exc.format_message())} (see {where} --help)", exc.exit_code)
        except click.ClickException as exc:
            fail(_sentence(exc.format_message()), exc.exit_code)
        except click.Abort:
            fail("aborted")
        sys.exit(returned if isinstance(returned, int) else 0)


def _reader_gone() -> NoReturn:
    """``show … | head``: the reader has what it wanted and closed the pipe. End without a
    word and with status 1 (as click and Python's own recipe do), after pointing stdout at
    /dev/null so that the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(1)


def _expected_failures() -> tuple[type[Exception], ...]:
    """The failures that are one line, not a traceback. Those of the proxy's modules are
    named only when a command imported them (else none can have been raised), so that
    reading a store never imports the proxy to name its errors."""
    found: list[type[Exception]] = [StoreError, InvalidCassetteName, ValueError, OSError]
    for module, name in (
        ("freezeframe.proxy.serve", "StartupError"),
        ("freezeframe.proxy.discovery", "NoProxyFound"),
        ("freezeframe.proxy.demo", "DemoFailed"),
    ):
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    return tuple(found)


def _sentence(message: str) -> str:
    """click's messages as one line without a closing full stop, like ours."""
    return " ".join(message.split()).rstrip(".")


@click.group(cls=FreezeframeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="freezeframe")
def main() -> None:
    """Record the exact bytes an agent exchanges over HTTP(S); replay them later.

    \b
    Example:
        freezeframe run --mode record --cassette bug-8821 &
        eval "$(freezeframe env --wait 30)"
        python agent.py
    """


COMMANDS = (
    start.run,
    start.exec_,
    start.demo,
    running.env,
    running.ca,
    running.replay_reset,
    read.ls,
    read.show,
    read.search,
    read.diff_runs,
    read.verify,
    read.explain,
    files.export,
    files.import_,
    files.keygen,
    edit.fork,
    edit.edit,
    edit.resend,
    edit.rekey,
    edit.rules,
    store.rm,
    store.gc,
    store.blobs,
    triage.triage,
    triage.note,
    triage.recheck,
)
"""Every command, by job; ``--help`` lists them by name."""

for command in COMMANDS:
    main.add_command(command)
