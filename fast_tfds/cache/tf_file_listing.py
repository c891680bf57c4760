"""The files of the reader's file caches: which there are, what each holds, removing them.

One cache (`as_fast_dataset(cache=PATH)`) is the set of files that share a
prefix `<PATH>.<dataset-config-version>.<split>.<16 hex digits>` (or
`<PATH>/<...>` when PATH is a folder), see `tf_file_key.cache_prefix`:

    <prefix>.lock                        our OS lock, and what the cache holds (JSON)
    <prefix>.index, <prefix>.data-*      a complete cache (TensorFlow writes the index last)
    <prefix>_0.lockfile, <prefix>_0.*    a pass being written, or left by a killed one

A live process that opened a cache holds `fcntl.flock` on its `.lock` until it
exits (see `file_cache`), so "in use" is a question the kernel answers: taking the
lock without waiting fails. `remove` takes the lock first and leaves a cache
in use alone. No TensorFlow here: plain files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Iterable

try:
    import fcntl
except ImportError:  # Windows: no flock; no way to tell a cache in use.
    fcntl = None

from fast_tfds.cache import disk_rows, fingerprint, remote_files

LOCK_SUFFIX = ".lock"
INDEX_SUFFIX = ".index"
# <prefix><rest>: the prefix ends with the 16 hex digits of the digest.
_CACHE_FILE = re.compile(
    r"^(?P<prefix>.+\.[0-9a-f]{16})(?P<rest>\.lock|\.index|\.data-\d+-of-\d+|_\d+\..+)$"
)


@dataclasses.dataclass
class CacheFiles:
    """One cache found in a folder."""

    prefix: str
    files: list[str]  # paths
    size: int  # bytes, all files
    last_used: float  # time.time() of the last open (the lock file) or write
    complete: bool
    dataset: str | None  # 'cats_vs_dogs_fast/224/1.0.0', if the lock file says
    split: str | None
    holder: str | None  # 'pid 123' of the live process that holds it, else None
    stale: bool | None  # its dataset was rebuilt or removed (None: not known)

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.last_used)


# -- the lock file's content -------------------------------------------------------


def lock_content(dataset: str, split: str, shard_files: Iterable[str]) -> bytes:
    """What a cache's owner writes into its lock file: who, and what the cache is made from
    (the fingerprints of its local shards, for `fingerprint.changed`; shards in a bucket
    are not listed for it)."""
    local = [name for name in shard_files if not remote_files.is_remote(name)]
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


# -- finding -----------------------------------------------------------------------


def find(folder: str | os.PathLike) -> list[CacheFiles]:
    """The caches whose files are in `folder`, oldest use first."""
    folder = os.fspath(folder)
    groups: dict[str, list[str]] = {}
    for name in os.listdir(folder):
        match = _CACHE_FILE.match(name)
        if match and os.path.isfile(os.path.join(folder, name)):
            prefix = os.path.join(folder, match.group("prefix"))
            groups.setdefault(prefix, []).append(os.path.join(folder, name))
    caches = [_describe(prefix, sorted(files)) for prefix, files in groups.items()]
    return sorted(caches, key=lambda c: c.last_used)


def _describe(prefix: str, files: list[str]) -> CacheFiles:
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
    return CacheFiles(
        prefix=prefix,
        files=files,
        size=sum(sizes),
        last_used=max(times, default=0.0),
        complete=os.path.exists(prefix + INDEX_SUFFIX),
        dataset=record.get("dataset"),
        split=record.get("split"),
        holder=holder(lock),
        stale=_stale(record),
    )


def _stale(record: dict) -> bool | None:
    """Whether a shard the cache was made from changed or is gone since it was written."""
    shards = record.get("shards")
    return fingerprint.changed(shards) if shards else None


# -- removing ----------------------------------------------------------------------


def remove(cache: CacheFiles) -> bool:
    """Deletes the cache's files unless a live process holds it; whether it did."""
    lock = cache.prefix + LOCK_SUFFIX
    fd = None
    if fcntl is not None and os.path.exists(lock):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
    try:
        # The lock file last, while still holding it: a process that opens the
        # cache meanwhile finds it held and reads without it.
        for path in [*(f for f in cache.files if f != lock), lock]:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
    finally:
        if fd is not None:
            os.close(fd)
    return True


def parse_age(text: str) -> float:
    """'30d', '12h', '45m', '90s' or a number of days -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise ValueError(f"{text!r}: not an age (e.g. 30d, 12h, 45m, 90s)")
    return float(match.group(1)) * units[match.group(2) or "d"]
