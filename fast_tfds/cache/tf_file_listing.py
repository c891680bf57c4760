"""The files of the reader's file caches: which there are, what each holds, removing them.

One cache (`as_fast_dataset(cache=PATH)`) is the set of files that share a
prefix `<PATH>.<dataset-config-version>.<split>.<16 hex digits>` (or
`<PATH>/<...>` when PATH is a folder), see `tf_file_key.cache_prefix`:

    <prefix>.lock                        our OS lock, and what the cache holds (JSON)
    <prefix>.index, <prefix>.data-*      a complete cache (TensorFlow writes the index last)
    <prefix>_0.lockfile, <prefix>_0.*    a pass being written, or left by a killed one

Each cache is one `housekeeping.Entry` of the kind `FILE_CACHES`. A live process that
opened a cache holds `fcntl.flock` on its `.lock` until it exits (see `tf_file_cache`),
so "in use" is a question the kernel answers: taking the lock without waiting fails.
Removing a cache takes the lock first and leaves a cache in use alone. No TensorFlow
here: plain files.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable

try:
    import fcntl
except ImportError:  # Windows: no flock; no way to tell a cache in use.
    fcntl = None

from fast_tfds.cache import disk_rows, fingerprint, housekeeping
from fast_tfds.cache.remote import object_stores

LOCK_SUFFIX = ".lock"
INDEX_SUFFIX = ".index"
# <prefix><rest>: the prefix ends with the 16 hex digits of the digest.
_CACHE_FILE = re.compile(
    r"^(?P<prefix>.+\.[0-9a-f]{16})(?P<rest>\.lock|\.index|\.data-\d+-of-\d+|_\d+\..+)$"
)


# -- the lock file's content -------------------------------------------------------


def lock_content(dataset: str, split: str, shard_files: Iterable[str]) -> bytes:
    """What a cache's owner writes into its lock file: who, and what the cache is made from
    (the fingerprints of its local shards, for `fingerprint.changed`; shards in a bucket
    are not listed for it)."""
    local = [name for name in shard_files if not object_stores.is_remote(name)]
    found = fingerprint.of(local)
    shards = [found[name] for name in local if name in found]
    record = {"pid": os.getpid(), "dataset": dataset, "split": split, "shards": shards}
    return json.dumps(record).encode()


def read_lock_content(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    try:
        record = json.loads(data)
    except ValueError:  # Before the JSON content: the pid alone.
        pid = data.strip().decode(errors="replace")
        return {"pid": pid} if pid else {}
    return record if isinstance(record, dict) else {}


def holder(lock_path: str) -> str | None:
    """'pid N' of the live process holding the lock, or None if no process holds it."""
    if fcntl is None or not disk_rows.is_locked(lock_path):
        return None
    return f"pid {read_lock_content(lock_path).get('pid', '?')}"


# -- finding ---------------------------------------------------------------------


def _entries(folder: str, names: list[str]) -> list[housekeeping.Entry]:
    """The file caches among `names` (sorted), the files of each grouped by prefix."""
    groups: dict[str, list[str]] = {}
    for name in names:
        match = _CACHE_FILE.match(name)
        if match and os.path.isfile(os.path.join(folder, name)):
            prefix = os.path.join(folder, match.group("prefix"))
            groups.setdefault(prefix, []).append(os.path.join(folder, name))
    return [_describe(prefix, files) for prefix, files in groups.items()]


FILE_CACHES = housekeeping.Kind("cache", _entries)


def _describe(prefix: str, files: list[str]) -> housekeeping.Entry:
    lock = prefix + LOCK_SUFFIX
    record = read_lock_content(lock)
    sizes, times = [], []
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:  # Removed meanwhile.
            continue
        sizes.append(stat.st_size)
        times.append(stat.st_mtime)
    complete = os.path.exists(prefix + INDEX_SUFFIX)
    stale = _stale(record)
    held = holder(lock)
    if held:
        state = f"{'complete, in use' if complete else 'being written'} by {held}"
    elif not complete:
        state = f"{housekeeping.UNFINISHED} ({housekeeping.LEFT})"
    elif stale:
        state = "complete, stale (its dataset was rebuilt or removed)"
    else:
        state = "complete"
    return housekeeping.Entry(
        where=prefix,
        what=f"{record.get('dataset') or '?'} {record.get('split') or '?'}",
        size=sum(sizes),
        last_used=max(times, default=0.0),
        state=state,
        holder=held,
        spent=housekeeping.UNFINISHED if not complete else "stale" if stale else None,
        remove=functools.partial(_remove, prefix, files),
    )


def _stale(record: dict) -> bool | None:
    """Whether a shard the cache was made from changed or is gone since it was written."""
    shards = record.get("shards")
    return fingerprint.changed(shards) if shards else None


# -- removing ----------------------------------------------------------------------


def _remove(prefix: str, files: list[str]) -> str | None:
    """Deletes the cache's files unless a live process holds it (then: why it is kept)."""
    lock = prefix + LOCK_SUFFIX
    fd = None
    if fcntl is not None and os.path.exists(lock):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return "in use"
    try:
        # The lock file last, while still holding it: a process that opens the
        # cache meanwhile finds it held and reads without it.
        for path in [*(f for f in files if f != lock), lock]:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
    finally:
        if fd is not None:
            os.close(fd)
    return None
