"""The loader's third-party modules, with one clear error when the extra is missing."""

from __future__ import annotations

import importlib
import logging

EXTRA = "loader"
INSTALL = f'pip install "fast-image-tfds[{EXTRA}]"'
# (module, the pip package that provides it)
_NEEDED = (
    ("grain", "grain"),
    ("array_record", "array_record"),
    ("simplejpeg", "simplejpeg"),
    ("cv2", "opencv-python-headless"),
)


class MissingLoaderExtra(ImportError):
    """The loader's dependencies are not installed; the message says how to install them."""


def require() -> None:
    """Imports every dependency once, or raises MissingLoaderExtra naming the extra.

    Grain logs "Failed to load jax profiler" when JAX is not installed, which is
    expected for PyTorch users; its warnings are silenced while it is imported."""
    # The logger's own level, not absl's verbosity: restoring the verbosity would
    # leave the logger at WARNING instead of unset, hiding absl INFO lines later.
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    missing = []
    try:
        for module, package in _NEEDED:
            try:
                importlib.import_module(module)
            except ImportError:
                missing.append(package)
    finally:
        logger.setLevel(level)
    if missing:
        raise MissingLoaderExtra(
            f"fast_tfds.loader needs {', '.join(missing)}, which the [{EXTRA}] extra "
            f"installs: {INSTALL}"
        )
