"""The persistent arenas in a folder (`persist=True`): their names, what each holds, whether a
process uses it, and removing them (`fast-tfds cache list|clean`, and a fill's leftovers).

    <dataset>.<split>.<16 hex digits of the key>.arena        a complete file
    <...>.arena-lock                                          the key's lock (who fills it)
    <...>.arena.arena-tmp-<pid>-<random>                      a fill in progress, or left

A process that maps a file holds a shared `flock` on it, and a fill an exclusive one on
its temporary file; `clean` takes the exclusive lock before removing, so a file in use is
never removed. No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import time
from pathlib import Path

from fast_tfds.cache import disk_rows, fingerprint
from fast_tfds.cache.persistent_format import BadFile, read_header

SUFFIX = ".arena"
LOCK_SUFFIX = ".arena-lock"
TEMP_MARK = ".arena-tmp-"


def lock_path(path: Path) -> Path:
    """The key's lock file of the persistent arena at `path`."""
    return path.with_name(path.name.removesuffix(SUFFIX) + LOCK_SUFFIX)


@dataclasses.dataclass(frozen=True)
class PersistentFile:
    """A persistent arena found in a folder (or a temporary file left by a fill)."""

    path: Path
    size: int  # bytes on disk
    last_used: float
    in_use: bool  # a running process maps it (or is filling it)
    dataset: str | None
    split: str | None
    problem: str | None  # why it would not be served; None for a good file
    stale: bool  # a shard it was made from changed or is gone
    kind: str | None = None  # "pictures" (`cache.persisted`); None: an older release's arena

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.last_used)


def find(folder: str | os.PathLike) -> list[PersistentFile]:
    """The persistent arenas and fill leftovers in `folder`, oldest use first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(SUFFIX):
            described = _describe(path)
        elif TEMP_MARK in path.name:
            described = _describe_temp(path)
        else:
            continue
        if described is not None:
            found.append(described)
    return sorted(found, key=lambda f: f.last_used)


def _describe(path: Path) -> PersistentFile | None:
    try:
        stat = path.stat()
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        header = read_header(fd)
        key = header.layout.key
        problem = None
        if header.layout.file_size != stat.st_size:
            problem = "truncated"
    except BadFile as err:
        key, problem = {}, str(err)
    finally:
        os.close(fd)
    return PersistentFile(
        path=path,
        size=stat.st_blocks * 512,
        last_used=max(stat.st_atime, stat.st_mtime),
        in_use=in_use(path),
        dataset=key.get("dataset"),
        split=key.get("split"),
        problem=problem,
        stale=bool(key.get("shards")) and fingerprint.changed(key["shards"]),
        kind=key.get("kind"),
    )


def _describe_temp(path: Path) -> PersistentFile | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    busy = in_use(path)
    return PersistentFile(
        path=path,
        size=stat.st_blocks * 512,
        last_used=stat.st_mtime,
        in_use=busy,
        dataset=None,
        split=None,
        problem="being written" if busy else "unfinished (left by a stopped fill)",
        stale=False,
    )


def in_use(path: Path) -> bool:
    """Whether a running process maps `path` (a shared lock) or fills it (exclusive)."""
    return disk_rows.is_locked(path, readers_too=True)


def remove(path: Path) -> bool:
    """Removes a persistent arena (and its lock file) unless a process uses it; whether
    it did. The exclusive lock is taken first, so a reader that opens it meanwhile waits
    and then finds it gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        path.unlink(missing_ok=True)
        if path.name.endswith(SUFFIX):
            lock = lock_path(path)
            if not disk_rows.is_locked(lock):
                lock.unlink(missing_ok=True)
    finally:
        os.close(fd)
    return True


def remove_leftovers(folder: Path) -> list[Path]:
    """Removes the temporary files of fills whose process is gone."""
    removed = []
    for found in find(folder):
        if TEMP_MARK in found.path.name and not found.in_use and remove(found.path):
            removed.append(found.path)
    return removed
