"""What identifies a build's shard files, for every cache made from them, and whether they
changed since.

A shard's fingerprint is [path, size, mtime_ns] of a local file, or [url, size, generation,
crc32c] of an object in a bucket (`remote.object_stores`: one listing of its folder, from the
objects' metadata, never their bytes). A rebuilt dataset changes it, so a cache keyed by
it is never served for other data:

- a persistent cache's key holds the fingerprints of every file of its split
  (`persisted.key`, which names the file on disk);
- a file cache's name digests each shard's size and modification time (`tf_file_cache.cache_prefix`:
  a local shard's from its fingerprint; an object in a bucket's as TensorFlow's client,
  which reads it, sees it, so that names made before stay), and its lock file records its
  local shards' fingerprints (`housekeeping.record_cache`);
- `fast-tfds cache list|clean` compares what a cache recorded with the files as they are
  now (`changed`): a cache of a rebuilt or removed dataset is stale.

No TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from fast_tfds.cache.remote import object_stores


def in_folder(folder: str, keep: Callable[[str], bool]) -> list[list]:
    """The fingerprints of the files in `folder` whose name `keep(name)` accepts, sorted by
    path; [] where there are none (or no such folder). A folder in a bucket (gs://) is
    listed once; `object_stores.NotKeyed` where that listing cannot be had."""
    if object_stores.is_remote(folder):
        return object_stores.fingerprints(folder, keep)
    found = []
    try:
        entries = os.scandir(folder or ".")
    except OSError:
        return []
    with entries:
        for entry in entries:
            if not keep(entry.name) or not entry.is_file():
                continue
            try:
                stat = entry.stat()
            except OSError:  # Removed meanwhile.
                continue
            found.append([os.path.join(folder, entry.name), stat.st_size, stat.st_mtime_ns])
    return sorted(found)


def of(paths: Iterable[str]) -> dict[str, list]:
    """{path: its fingerprint} of those of `paths` that are local files (a missing file has
    none; an object in a bucket is not looked at), each folder looked at once."""
    wanted: dict[str, dict[str, str]] = {}
    for path in map(os.fspath, paths):
        if object_stores.is_remote(path):
            continue
        folder, name = os.path.split(path)
        wanted.setdefault(folder, {})[name] = path
    found = {}
    for folder, names in wanted.items():
        for listed, *rest in in_folder(folder, names.__contains__):
            path = names[os.path.basename(listed)]  # As the caller spelled it.
            found[path] = [path, *rest]
    return found


def changed(recorded: Iterable[list]) -> bool:
    """Whether any local shard a cache recorded (its fingerprints) is gone, or has another
    size or modification time.

    Objects in a bucket are not looked at: that would take a request to the bucket
    each time a cache folder is listed (every open does). A rewritten object is never
    served from an old file all the same (the key names its generation), and the old
    file is left unused, for `fast-tfds cache clean --older-than AGE` to remove."""
    local = [list(shard[:3]) for shard in recorded if not object_stores.is_remote(shard[0])]
    now = of(path for path, *_ in local)
    return any(now.get(shard[0]) != shard for shard in local)
