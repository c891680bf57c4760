"""The persistent arenas in a folder (`persist=True`): their names, what each holds, whether a
process uses it, and removing them: each is one `housekeeping.Entry` of the kind
`PERSISTENT` (`fast-tfds cache list|clean`, and a fill's leftovers).

    <dataset>.<split>.<16 hex digits of the key>.arena        a complete file
    <...>.arena-lock                                          the key's lock (who fills it)
    <...>.arena.arena-tmp-<pid>-<random>                      a fill in progress, or left

A process that maps a file holds a shared `flock` on it, and a fill an exclusive one on
its temporary file; `clean` takes the exclusive lock before removing, so a file in use is
never removed. No TensorFlow.
"""

from __future__ import annotations

import fcntl
import functools
import os
from pathlib import Path

from fast_tfds.cache import disk_rows, fingerprint, housekeeping
from fast_tfds.cache.persistent_format import BadFile, read_header

SUFFIX = ".arena"
LOCK_SUFFIX = ".arena-lock"
TEMP_MARK = ".arena-tmp-"


def lock_path(path: Path) -> Path:
    """The key's lock file of the persistent arena at `path`."""
    return path.with_name(path.name.removesuffix(SUFFIX) + LOCK_SUFFIX)


def _entries(folder: str, names: list[str]) -> list[housekeeping.Entry]:
    """The persistent arenas and fill leftovers among `names`."""
    found = []
    for name in names:
        path = Path(folder) / name
        if name.endswith(SUFFIX):
            described = _describe(path)
        elif TEMP_MARK in name:
            described = _describe_temp(path)
        else:
            continue
        if described is not None:
            found.append(described)
    return found


PERSISTENT = housekeeping.Kind("persistent cache", _entries)


def _describe(path: Path) -> housekeeping.Entry | None:
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
    stale = bool(key.get("shards")) and fingerprint.changed(key["shards"])
    held = housekeeping.RUNNING if in_use(path) else None
    state = "persistent, in use" if held else "persistent"
    if problem:
        state = f"{state}, damaged ({problem})"
    elif stale:
        state = f"{state}, stale (its dataset was rebuilt or removed)"
    return housekeeping.Entry(
        where=str(path),
        what=f"{key.get('dataset') or '?'} {key.get('split') or '?'}",
        size=stat.st_blocks * 512,
        last_used=max(stat.st_atime, stat.st_mtime),
        state=state,
        holder=held,
        spent="damaged" if problem else "stale" if stale else None,
        remove=functools.partial(_remove, path),
    )


def _describe_temp(path: Path) -> housekeeping.Entry | None:
    """A fill's temporary file: being written, or left by a fill that stopped."""
    try:
        stat = path.stat()
    except OSError:
        return None
    held = housekeeping.RUNNING if in_use(path) else None
    left = f"{housekeeping.UNFINISHED} (left by a stopped fill)"
    return housekeeping.Entry(
        where=str(path),
        what="? ?",
        size=stat.st_blocks * 512,
        last_used=stat.st_mtime,
        state=f"persistent, {'being written' if held else left}",
        holder=held,
        spent=housekeeping.UNFINISHED,
        remove=functools.partial(_remove, path),
    )


def in_use(path: Path) -> bool:
    """Whether a running process maps `path` (a shared lock) or fills it (exclusive)."""
    return disk_rows.is_locked(path, readers_too=True)


def _remove(path: Path) -> str | None:
    """Removes a persistent arena (and its lock file) unless a process uses it (then: why
    it is kept). The exclusive lock is taken first, so a reader that opens it meanwhile
    waits and then finds it gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"in use by {housekeeping.RUNNING}"
        path.unlink(missing_ok=True)
        if path.name.endswith(SUFFIX):
            lock = lock_path(path)
            if not disk_rows.is_locked(lock):
                lock.unlink(missing_ok=True)
    finally:
        os.close(fd)
    return None
