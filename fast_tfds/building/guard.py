"""What goes around a build: one build of a dataset per data dir at a time, and a full disk
said in one line.

Two `tfds build` processes on the same data dir and dataset would both build
into their own `incomplete.*` folder; the second to finish then fails to
rename its folder over the first one's result (a traceback, after doing all
the work twice), and both download the same archives. `build_lock` holds an
OS lock (`fcntl.flock`, released by the kernel when the process dies, so never
stale) on `<data_dir>/<dataset>/.fast_tfds_build.lock` for the whole
`download_and_prepare`: the second process waits, then finds the dataset built
and reuses it. It covers every config of the dataset, as they share the
downloads. Remote data dirs (gs://) cannot be flock-ed: no lock there.

A build that runs out of disk space fails in TensorFlow's record writer, or in
Python, with "No space left on device" somewhere in a chain of TFDS wrappers.
TFDS removes its `incomplete.*` folder on the way out, so nothing half-written
is ever visible; `disk_full_as_error` turns the error into one `DiskFullError`
line that says so and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator

from absl import logging
from etils import epath

from fast_tfds.building.errors import BuildError

try:
    import fcntl
except ImportError:  # Windows: no flock, no lock.
    fcntl = None

LOCK_NAME = ".fast_tfds_build.lock"
# OS errors that mean "the disk (or the quota, or the size limit) is full".
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


@contextlib.contextmanager
def build_lock(dataset_dir: epath.Path, what: str) -> Iterator[bool]:
    """Holds the build lock of `dataset_dir` (<data_dir>/<dataset>); yields whether it waited."""
    if fcntl is None or "://" in os.fspath(dataset_dir):
        yield False
        return
    dataset_dir = epath.Path(dataset_dir)
    path = os.fspath(dataset_dir / LOCK_NAME)
    made_dir = waited = False
    while True:
        made_dir = made_dir or not dataset_dir.exists()
        dataset_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd, made_file = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, made_file = os.open(path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # A failed build removed it just now: make it.
        try:
            waited = _lock(fd, what, dataset_dir) or waited
        except BaseException:
            os.close(fd)
            raise
        if _is_current(fd, path):
            break
        # A failed build removed the file it made while we waited: lock the new one.
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "build": what}).encode(), 0)
        yield waited
    except BaseException:
        # A failed (or interrupted) build leaves nothing it made: the lock file and the
        # dataset folder go, while the lock is held (a waiting build then locks afresh).
        if made_file:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if made_dir:
            with contextlib.suppress(OSError):
                os.rmdir(dataset_dir)  # Only if empty: what others wrote stays.
        raise
    finally:
        os.close(fd)  # Releases the lock.


def _lock(fd: int, what: str, dataset_dir: epath.Path) -> bool:
    """Locks `fd`, waiting for another build if one holds it; returns whether it waited."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        holder = _read_holder(fd)
    logging.warning(
        "%s: another build in %s is running (%s); waiting for it to finish.",
        what,
        dataset_dir,
        holder,
    )
    start = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_EX)
    logging.info("%s: the other build ended after %.1f s.", what, time.monotonic() - start)
    return True


def _is_current(fd: int, path: str) -> bool:
    """Whether `fd` is still the file at `path` (a failed build may have removed it)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


@contextlib.contextmanager
def removed_on_failure(*paths: epath.Path) -> Iterator[None]:
    """If the body fails (an error, Ctrl-C), removes those of `paths` that it made: files,
    and folders only if empty. Parents come first in `paths`; local paths only."""
    made = [os.fspath(p) for p in paths if "://" not in os.fspath(p) and not p.exists()]
    try:
        yield
    except BaseException:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    os.rmdir(path)
                elif os.path.lexists(path):
                    os.unlink(path)
        raise


def _read_holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {holder['pid']}, {holder['build']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown"


class DiskFullError(BuildError):
    """A build ran out of disk space; nothing of it was kept."""


@contextlib.contextmanager
def disk_full_as_error(dataset: str, data_dir: epath.Path) -> Iterator[None]:
    """Re-raises a 'no space left' error of the build inside as one DiskFullError line."""
    try:
        yield
    except Exception as err:
        cause = _disk_full_cause(err)
        if cause is None:
            raise
        logging.debug("%s: the build ran out of space", dataset, exc_info=True)
        raise DiskFullError(
            f"{dataset}: the build ran out of disk space in {data_dir} ({cause}); "
            f"{_free_space(data_dir)}. Nothing of this build was kept (its incomplete.* "
            "folder is removed). Free some space, or build into another folder with "
            "--data_dir (data_dir= in Python), and run the same command again."
        ) from None


def _disk_full_cause(err: BaseException) -> str | None:
    """The 'no space' in err's chain, in words, or None if it is another error."""
    # TensorFlow's errors exist only if it was imported (the build layer does not need it).
    tf = sys.modules.get("tensorflow")
    op_error = getattr(getattr(tf, "errors", None), "OpError", ())
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL:
            return os.strerror(err.errno)
        if isinstance(err, op_error):
            # TensorFlow keeps the OS's words (strerror) but not the errno.
            for code in _FULL:
                if os.strerror(code) in err.message:
                    return os.strerror(code)
        err = err.__cause__ or err.__context__
    return None


def _free_space(folder: epath.Path) -> str:
    folder = os.fspath(folder)
    if "://" in folder:
        return "free space unknown"
    while folder and not os.path.exists(folder):
        folder = os.path.dirname(folder)
    try:
        usage = shutil.disk_usage(folder or ".")
    except OSError:
        return "free space unknown"
    return f"{usage.free / 2**20:,.1f} MiB free of {usage.total / 2**20:,.1f} MiB now"
