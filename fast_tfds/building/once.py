"""Build notices said once per process.

`tfds build DATASET` without `--config` builds every config in one process, and each
config's build finds the same manual-dir archives and skips the same files: the same
lines, once per config, would read as if something had happened twice. A notice that
differs (another config that skips other files) is still said.
"""

from __future__ import annotations

from absl import logging

_said: set[tuple[int, str]] = set()


def log_once(level: int, message: str, *args) -> None:
    """absl's `logging.log(level, message, *args)`, unless this process said it already."""
    key = (level, message % args if args else message)
    if key in _said:
        return
    _said.add(key)
    logging.log(level, message, *args)


# The log line names the module that called log_once, not this one.
logging.ABSLLogger.register_frame_to_skip(__file__, "log_once")
