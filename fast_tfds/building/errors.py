"""Errors a user can act on, shown as one message instead of a traceback.

A build that cannot work (no network, a source archive of the wrong shape, a
full disk) raises a `BuildError`: one line that says what went wrong and what
to do. `tfds build` would print such an error under a 40-line traceback through
absl, the TFDS CLI and our builder, none of it useful to the person reading it.

So the command-line programs install a narrow `sys.excepthook`: an uncaught
`BuildError` is printed as `ERROR: <message>` (exit status 1, as for any
uncaught exception), Ctrl-C as one line that says to run the command again
(exit status 130, as Python's); every other exception goes to the hook that was
there before, unchanged. The traceback is still written to the log at debug level,
and `FAST_TFDS_TRACEBACK=1` prints it as Python would.

The hook belongs to the program, not to the library: importing our packages
changes nothing. `fast-tfds` installs it in its `main()`; under `tfds build`,
which we do not start, our builder installs it when it is made by the TFDS
command line (`install_excepthook_under_tfds_cli`), and in no other program.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback

from absl import logging

# Set to 1 to get the full traceback of a BuildError.
TRACEBACK_ENV = "FAST_TFDS_TRACEBACK"
# The module of the `tfds` command line: the `tfds` script's entry point, and the
# module `python -m tensorflow_datasets.scripts.cli.main` runs as __main__.
TFDS_CLI_MODULE = "tensorflow_datasets.scripts.cli.main"


class BuildError(Exception):
    """A build cannot go on; the message (one line) says why and what to do."""


# Ctrl-C: TFDS removes its incomplete.* folder and our builder what else it made, so
# the traceback (through absl, TFDS and the builder) says nothing a user needs.
INTERRUPTED = "Interrupted: nothing half-built was kept; run the same command again to build."


def _excepthook(kind, value, tb, *, previous) -> None:
    ours = isinstance(value, (BuildError, KeyboardInterrupt))
    if not ours or os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
        previous(kind, value, tb)
        return
    logging.debug("".join(traceback.format_exception(kind, value, tb)))
    line = INTERRUPTED if isinstance(value, KeyboardInterrupt) else f"ERROR: {value}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def install_excepthook() -> None:
    """Shows uncaught BuildErrors as one line; idempotent, delegates everything else.

    For a program's entry point only: it changes how the whole process reports
    uncaught exceptions.
    """
    if getattr(sys.excepthook, "_fast_tfds_hook", False):
        return
    hook = functools.partial(_excepthook, previous=sys.excepthook)
    hook._fast_tfds_hook = True
    sys.excepthook = hook


def called_from_tfds_cli() -> bool:
    """Whether the `tfds` command line is on the call stack (`tfds build ...`)."""
    frame = sys._getframe(1)
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        if TFDS_CLI_MODULE in (frame.f_globals.get("__name__"), getattr(spec, "name", None)):
            return True
        frame = frame.f_back
    return False


def install_excepthook_under_tfds_cli() -> None:
    """`install_excepthook()` if the `tfds` command line is running this code, else nothing.

    Called where a builder is made: the TFDS command line makes its builders in
    its own process before it builds them (in that process or in a pool), so the
    hook is in place wherever the error ends up uncaught.
    """
    if called_from_tfds_cli():
        install_excepthook()
