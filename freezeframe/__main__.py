"""``python -m freezeframe``: the command line, as the ``freezeframe`` console script runs it."""

from freezeframe.cli import main

main(prog_name="freezeframe")
