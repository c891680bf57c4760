"""Errors a user can act on, shown as one message instead of a traceback.

A build that cannot work (no network, a source archive of the wrong shape, a
full disk) raises a `BuildError`: one line that says what went wrong and what
to do. `tfds build` would print such an error under a 40-line traceback through
absl, the TFDS CLI and our builder, none of it useful to the person reading it.

So importing this module installs a narrow `sys.excepthook`: an uncaught
`BuildError` is printed as `ERROR: <message>` (exit status 1, as for any
uncaught exception); every other exception goes to the hook that was there
before, unchanged. The traceback is still written to the log at debug level,
and `FAST_TFDS_TRACEBACK=1` prints it as Python would. Notebooks (IPython) do
not use `sys.excepthook` and show their usual traceback.
"""

from __future__ import annotations

import os
import sys
import traceback

from absl import logging

# Set to 1 to get the full traceback of a BuildError.
TRACEBACK_ENV = "FAST_TFDS_TRACEBACK"


class BuildError(Exception):
    """A build cannot go on; the message (one line) says why and what to do."""


def _excepthook(kind, value, tb, *, previous) -> None:
    if not isinstance(value, BuildError) or os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
        previous(kind, value, tb)
        return
    logging.debug("".join(traceback.format_exception(kind, value, tb)))
    sys.stderr.write(f"ERROR: {value}\n")
    sys.stderr.flush()


def install_excepthook() -> None:
    """Shows uncaught BuildErrors as one line; idempotent, delegates everything else."""
    if getattr(sys.excepthook, "_fast_tfds_hook", False):
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        _excepthook(kind, value, tb, previous=previous)

    hook._fast_tfds_hook = True
    sys.excepthook = hook


install_excepthook()
