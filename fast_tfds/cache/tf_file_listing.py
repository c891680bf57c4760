"""The files of the reader's file caches: which there are, what each holds, removing them.

One cache (`as_fast_dataset(cache=PATH)`) is the set of files that share a
prefix `<PATH>.<dataset-config-version>.<split>.<16 hex digits>` (or
`<PATH>/<...>` when PATH is a folder), see `tf_file_cache.cache_prefix`:

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
from collections.abc import Sequence

from fast_tfds.cache import fingerprint, housekeeping

LOCK_SUFFIX = ".lock"
INDEX_SUFFIX = ".index"
# <prefix><rest>: the prefix ends with the 16 hex digits of the digest.
_CACHE_FILE = re.compile(
    r"^(?P<prefix>.+\.[0-9a-f]{16})(?P<rest>\.lock|\.index|\.data-\d+-of-\d+|_\d+\..+)$"
)


# -- the lock file's content -------------------------------------------------------


def lock_content(dataset: str, split: str, shard_files: Sequence[str]) -> bytes:
    """What a cache's owner writes into its lock file: who, and what the cache is made from
    (the fingerprints of its local shards, for `fingerprint.changed`; shards in a bucket
    are not listed for it)."""
    found = fingerprint.of(shard_files)
    shards = [found[name] for name in shard_files if name in found]
    record = {"pid": os.getpid(), "dataset": dataset, "split": split, "shards": shards}
    return json.dumps(record).encode()


def holder(lock_path: str) -> str | None:
    """'pid N' of the live process holding the lock, or None if no process holds it."""
    if not housekeeping.is_locked(lock_path):
        return None
    return f"pid {housekeeping.lock_record(lock_path).get('pid', '?')}"


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
    record = housekeeping.lock_record(lock)
    sizes, times = [], []
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:  # Removed meanwhile.
            continue
        sizes.append(stat.st_size)
        times.append(stat.st_mtime)
    complete = os.path.exists(prefix + INDEX_SUFFIX)
    # Whether a shard the cache was made from changed or is gone since it was written.
    stale = fingerprint.changed(record.get("shards") or ())
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


# -- removing ----------------------------------------------------------------------


def _remove(prefix: str, files: list[str]) -> str | None:
    """Deletes the cache's files unless a live process holds it (then: why it is kept).
    The lock file last, while still holding it: a process that opens the cache meanwhile
    finds it held and reads without it."""
    lock = prefix + LOCK_SUFFIX
    return housekeeping.remove_unless_locked(lock, [*(f for f in files if f != lock), lock])
