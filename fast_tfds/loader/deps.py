"""The loader's third-party modules, with one clear error when the extra is missing."""

from __future__ import annotations

import contextlib
import importlib

EXTRA = "loader"
INSTALL = f'pip install "fast-image-tfds[{EXTRA}]"'
# (module, the pip package that provides it)
_NEEDED = (
    ("grain", "grain"),
    ("array_record", "array_record"),
    ("simplejpeg", "simplejpeg"),
    ("cv2", "opencv-python-headless"),
)


@contextlib.contextmanager
def _quiet_absl():
    """Grain logs "Failed to load jax profiler" when JAX is not installed, which is
    expected for PyTorch users; its warnings are silenced while it is imported."""
    from absl import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)


class MissingLoaderExtra(ImportError):
    """The loader's dependencies are not installed; the message says how to install them."""


def require() -> None:
    """Imports every dependency once, or raises MissingLoaderExtra naming the extra."""
    missing = []
    for module, package in _NEEDED:
        try:
            with _quiet_absl():
                importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise MissingLoaderExtra(
            f"fast_tfds.loader needs {', '.join(missing)}, which the [{EXTRA}] extra "
            f"installs: {INSTALL}"
        )
