"""The `tfds build` command lines that our messages suggest, written to work as printed.

A suggested command is copied and run from wherever the user is, often not the
folder the build ran in. So it names what a bare `tfds build NAME` would not
find from there: the package that registers the dataset (`--imports`; without
it TFDS looks for the dataset in the current folder and ends in
`DatasetNotFoundError`), and the data dir as an absolute path unless it is
TFDS's default.
"""

from __future__ import annotations

import os
import shlex


def tfds_build_command(
    dataset: str, *, module: str | None, data_dir: str | os.PathLike, options: tuple[str, ...] = ()
) -> str:
    """`tfds build DATASET [--imports PACKAGE] [--data_dir DIR] [OPTIONS]`, shell-quoted.

    `module` is the module that defines the builder (a class's `__module__`, or
    `DatasetInfo.module_name`); its top-level package is imported, which
    registers the dataset. TFDS's own datasets need no import.
    """
    command = ["tfds", "build", dataset]
    package = (module or "").partition(".")[0]
    if package and package not in ("__main__", "tensorflow_datasets"):
        command += ["--imports", package]
    data_dir = absolute_path(data_dir)
    if data_dir != absolute_path(_default_data_dir()):
        command += ["--data_dir", data_dir]
    return shlex.join([*command, *options])


def absolute_path(path: str | os.PathLike) -> str:
    """`path` made absolute, `~` expanded (the same url for a path in a bucket): as a
    suggested command must name it, to work from any folder."""
    path = os.fspath(path)
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


def _default_data_dir() -> str:
    from tensorflow_datasets.core import constants  # Already loaded by any builder.

    return constants.DATA_DIR
