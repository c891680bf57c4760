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
from stat import S_ISREG

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
    groups: dict[str, dict[str, os.stat_result]] = {}
    for name in names:
        match = _CACHE_FILE.match(name)
        path = os.path.join(folder, name)
        try:
            stat = os.stat(path) if match else None
        except OSError:  # Removed meanwhile.
            continue
        if stat is not None and S_ISREG(stat.st_mode):
            groups.setdefault(os.path.join(folder, match.group("prefix")), {})[path] = stat
    return [_describe(prefix, files) for prefix, files in groups.items()]


FILE_CACHES = housekeeping.Kind("cache", _entries)

# What `list` says of a cache no process holds, by why it can never be served again.
_STATES = {
    None: "complete",
    "stale": "complete, stale (its dataset was rebuilt or removed)",
    housekeeping.UNFINISHED: f"{housekeeping.UNFINISHED} ({housekeeping.LEFT})",
}


def _describe(prefix: str, files: dict[str, os.stat_result]) -> housekeeping.Entry:
    lock = prefix + LOCK_SUFFIX
    record = housekeeping.lock_record(lock)
    complete = os.path.exists(prefix + INDEX_SUFFIX)
    # Whether a shard the cache was made from changed or is gone since it was written.
    stale = fingerprint.changed(record.get("shards") or ())
    spent = housekeeping.UNFINISHED if not complete else "stale" if stale else None
    held = holder(lock)
    if held:
        state = f"{'complete, in use' if complete else 'being written'} by {held}"
    else:
        state = _STATES[spent]
    return housekeeping.Entry(
        where=prefix,
        what=f"{record.get('dataset') or '?'} {record.get('split') or '?'}",
        size=sum(stat.st_size for stat in files.values()),
        last_used=max((stat.st_mtime for stat in files.values()), default=0.0),
        state=state,
        holder=held,
        spent=spent,
        # Its files, the lock file last, while holding it: a process that opens the cache
        # meanwhile finds it held and reads without it.
        remove=functools.partial(
            housekeeping.remove_unless_locked, lock, [f for f in files if f != lock]
        ),
    )
