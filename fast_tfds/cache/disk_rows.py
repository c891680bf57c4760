"""Cache rows in a memory-mapped file on local disk, for caches larger than the memory budget.

The rows have the same layout as in memory; the kernel's page cache keeps as
many of them in memory as the budget allows and reads the rest back from disk,
instead of the process thrashing against its memory limit.

A file holds the rows of one process's cache and is never reused by another run,
so a fill that was killed half-way is never trusted. Its owner holds an exclusive
`flock` on it while it lives; a file whose lock is free belongs to a process that
is gone, and the next cache made in the folder (or `fast-tfds cache clean`) removes it.
Each file is one `housekeeping.Entry` of the kind `ROWS`.
"""

from __future__ import annotations

import fcntl
import fnmatch
import functools
import mmap
import os
import uuid
import weakref
from pathlib import Path

import numpy as np

from fast_tfds.cache import housekeeping, memory

PREFIX = "arena-"
SUFFIX = ".rows"
# What such a file holds, in the column where `fast-tfds cache list` names a dataset.
WHAT = "rows of a memory cache (cache=True)"
CACHE_DIR_ENV = "FAST_TFDS_CACHE_DIR"


def default_folder() -> Path:
    """$FAST_TFDS_CACHE_DIR, else $XDG_CACHE_HOME/fast_tfds, else ~/.cache/fast_tfds."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fast_tfds"


class NotEnoughRoom(ValueError):
    """Neither memory nor the cache folder can hold the cache; the message says what to do."""


def check_room(folder: Path, need: int) -> None:
    """Raises NotEnoughRoom unless `folder` (made if missing) has `need` bytes free."""
    folder.mkdir(parents=True, exist_ok=True)
    housekeeping.remove_leftovers(folder, ROWS)
    free = housekeeping.short_of_room(folder, need)
    if free is not None:
        need_text, free_text = memory.bytes_text(need), memory.bytes_text(free)
        raise NotEnoughRoom(f"the cache needs {need_text} and {folder} has {free_text} free")


def allocate(folder: Path, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A [*shape] array over a new file in `folder`, removed when the array is freed."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    nbytes = max(count * dtype.itemsize, 1)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}{SUFFIX}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, nbytes)  # Sparse: disk blocks are used as rows are written.
        region = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    array = np.frombuffer(region, dtype, count=count).reshape(shape)
    # The file goes with the last view of its rows (the mapping keeps the data
    # readable after the unlink); the lock goes with the descriptor. In either order: a
    # file whose lock is free is a leftover that anyone may remove.
    weakref.finalize(region, os.close, fd)
    weakref.finalize(region, path.unlink, missing_ok=True)
    return array


def _entries(folder: str, names: list[str]) -> list[housekeeping.Entry]:
    """The cache files among `names`, and whether a running process holds each."""
    found = []
    for name in fnmatch.filter(names, f"{PREFIX}*{SUFFIX}"):
        path = Path(folder) / name
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        held = housekeeping.holder(path, recorded=False)
        found.append(
            housekeeping.Entry(
                where=str(path),
                what=WHAT,
                size=stat.st_size,
                last_used=stat.st_mtime,
                state=f"in use by {held}" if held else housekeeping.LEFT,
                holder=held,
                # Never reused by another run: only its owner can read it.
                spent=None if held else housekeeping.LEFT,
                remove=functools.partial(path.unlink, missing_ok=True),
            )
        )
    return found


ROWS = housekeeping.Kind("memory-cache file", _entries)
