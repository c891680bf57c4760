"""Every cache on disk, of every kind, as `fast-tfds cache list|clean` sees it: one entry
type (`Entry`), one way to find a kind's entries in a folder (`find`), and one rule for
what `clean` removes (`why_remove`).

Three kinds of caches have files on disk: the file caches of `cache=PATH` (`FILE_CACHES`,
below: their files are TensorFlow's, read here without it), the rows of a memory cache
larger than the memory budget (`disk_rows.ROWS`), and the persistent caches of
`persist=True` (`persistent_format.PERSISTENT`), each of the last two described by the
module that knows its files. A cache that a running process holds is never removed (its
OS lock says so). Plain files, no TensorFlow.

A file cache (`as_fast_dataset(cache=PATH)`, made by `tf_file_cache`) is the set of files
that share a prefix `<PATH>.<dataset-config-version>.<split>.<16 hex digits>` (or
`<PATH>/<...>` when PATH is a folder), see `tf_file_cache.cache_prefix`:

    <prefix>.lock                        our OS lock, and what the cache holds (JSON)
    <prefix>.index, <prefix>.data-*      a complete cache (TensorFlow writes the index last)
    <prefix>_0.lockfile, <prefix>_0.*    a pass being written, or left by a killed one

A live process that opened a cache holds `fcntl.flock` on its `.lock` until it exits (see
`tf_file_cache`), so "in use" is a question the kernel answers: taking the lock without
waiting fails. Removing a cache takes the lock first and leaves a cache in use alone.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from stat import S_ISREG

from fast_tfds.cache import fingerprint

# Who holds a cache whose lock names no process: a process maps it, or fills it.
RUNNING = "a running process"
# Why a cache can never be served again, when a process that is gone left it.
UNFINISHED = "unfinished"
LEFT = "left by a stopped run"
# The units of an age, as `list` prints it and `clean --older-than` takes it.
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One cache on disk, whatever its kind."""

    where: str  # its path, or a file cache's file prefix
    what: str  # its dataset and split ('? ?' where not known), or what its rows are
    size: int  # bytes on disk
    last_used: float  # time.time() of its last use
    state: str  # what `list` says of it: complete, in use, being written, stale, ...
    holder: str | None  # who uses it ('pid 12', RUNNING); None: no running process
    spent: str | None  # why it can never be served again (UNFINISHED, 'stale', LEFT, ...)
    # Removes it unless a process took it since it was found: None, or why it was kept.
    remove: Callable[[], str | None] = dataclasses.field(compare=False, repr=False)

    @property
    def in_use(self) -> bool:
        return self.holder is not None

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.last_used)


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of cache on disk: what one is called (`list` and `clean` count them by it),
    and which of a folder's files are its caches: `entries(folder, names)`."""

    noun: str
    entries: Callable[[str, list[str]], list[Entry]]


def find(folder: str | os.PathLike, kind: Kind) -> list[Entry]:
    """The caches of `kind` in `folder`, oldest use first; none where there is no folder."""
    folder = os.fspath(folder)
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(kind.entries(folder, names), key=lambda entry: entry.last_used)


def why_remove(entry: Entry, *, older_than_s: float | None, everything: bool) -> str | None:
    """Why `clean` removes `entry`, or None to keep it: never one in use; always one that
    can never be served again; another with --all, or --older-than when unused so long."""
    if entry.in_use:
        return None
    if entry.spent is not None:
        return entry.spent
    if everything:
        return "--all"
    if older_than_s is not None and entry.age_s > older_than_s:
        return f"not used for {age_text(entry.age_s).removesuffix(' ago')}"
    return None


def remove_leftovers(folder: str | os.PathLike, kind: Kind) -> list[str]:
    """Removes what processes that are gone left of `kind` in `folder` (a fill stopped
    half-way, a memory cache's rows): nothing can ever use it. The paths it removed."""
    return [
        entry.where
        for entry in find(folder, kind)
        if not entry.in_use and entry.spent in (UNFINISHED, LEFT) and entry.remove() is None
    ]


def take_lock(path: str | os.PathLike) -> int | None:
    """An open descriptor of the lock file `path` (made if missing) holding its exclusive
    `flock`, or None where a live process holds that lock (or removed it meanwhile).
    Raises any other OSError of opening or locking it (a filesystem without locks, say):
    the caller says so in one line. The file's time becomes now: when the cache was last
    opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.utime(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # `fast-tfds cache clean` may have removed the file meanwhile: holding the lock of
        # a file no longer at `path` would not exclude anyone.
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            return fd
    except (BlockingIOError, FileNotFoundError):  # Held, or removed.
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def record_holder(fd: int, **what: object) -> None:
    """Writes into a lock file that this process holds it (JSON: its "pid", then `what`),
    as `lock_record` reads it back."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), **what}).encode(), 0)


def holder(
    path: str | os.PathLike, *, readers_too: bool = False, recorded: bool = True
) -> str | None:
    """Who holds `flock` on `path` (the lock goes with its holder), or None if no live
    process does: an exclusive lock, or with `readers_too` a shared one as well. 'pid N'
    as its lock record says, or RUNNING for a cache file that is its own lock (not
    `recorded`: its contents are rows, not who holds it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Gone, or not ours to read: nothing we could clean up anyway.
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if readers_too else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return f"pid {lock_record(path).get('pid', '?')}" if recorded else RUNNING
    finally:
        os.close(fd)
    return None


def lock_record(path: str | os.PathLike) -> dict:
    """What a cache's lock file says of its holder and contents (JSON: at least its "pid");
    {} where it says nothing readable."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {}
    try:
        record = json.loads(data)
    except ValueError:  # Before the JSON content: the pid alone.
        pid = data.strip().decode(errors="replace")
        return {"pid": pid} if pid else {}
    return record if isinstance(record, dict) else {}


def remove_unless_locked(lock: str | os.PathLike, files: Iterable[str | os.PathLike]) -> str | None:
    """Removes `files`, then `lock` itself, unless a running process holds `lock` (shared
    or exclusive): then why they are kept. The exclusive lock is taken first and held
    while removing, the lock file last, so a process that opens the cache meanwhile waits
    and then finds it gone, or finds it held and does without it."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for path in [*files, lock]:
            Path(path).unlink(missing_ok=True)
    except BlockingIOError:
        return f"in use by {RUNNING}"
    finally:
        if fd is not None:
            os.close(fd)
    return None


def short_of_room(folder: str | os.PathLike, need: int) -> int | None:
    """The bytes free in `folder` where fewer than the `need` of a cache written there
    (a file cache, or a memory cache's rows), else None: it fits."""
    free = shutil.disk_usage(folder).free
    return free if free < need else None


def readable_name(dataset: str, split: object) -> str:
    """`<dataset>.<split>`, '/' as '-' and any run of characters other than [A-Za-z0-9_.-]
    as '_': how a cache's file name begins, before the digest of what it holds."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{dataset.replace('/', '-')}.{split}")


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def age_text(seconds: float) -> str:
    for unit in "dhm":
        if seconds >= _SECONDS[unit]:
            return f"{seconds / _SECONDS[unit]:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


def parse_age(text: str) -> float:
    """'30d', '12h', '45m', '90s' or a number of days -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise ValueError(f"{text!r}: not an age (e.g. 30d, 12h, 45m, 90s)")
    return float(match.group(1)) * _SECONDS[match.group(2) or "d"]


# -- the file caches -----------------------------------------------------------------

LOCK_SUFFIX = ".lock"
INDEX_SUFFIX = ".index"
# <prefix><rest>: the prefix ends with the 16 hex digits of the digest.
_CACHE_FILE = re.compile(
    r"^(?P<prefix>.+\.[0-9a-f]{16})(?P<rest>\.lock|\.index|\.data-\d+-of-\d+|_\d+\..+)$"
)


def record_cache(fd: int, dataset: str, split: str, shard_files: Sequence[str]) -> None:
    """What a cache's owner writes into its lock file: who, and what the cache is made from
    (the fingerprints of its local shards, for `fingerprint.changed`; shards in a bucket
    are not listed for it)."""
    found = fingerprint.of(shard_files)
    shards = [found[name] for name in shard_files if name in found]
    record_holder(fd, dataset=dataset, split=split, shards=shards)


def _file_caches(folder: str, names: list[str]) -> list[Entry]:
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
    return [_file_cache(prefix, files) for prefix, files in groups.items()]


FILE_CACHES = Kind("cache", _file_caches)

# What `list` says of a cache no process holds, by why it can never be served again.
_STATES = {
    None: "complete",
    "stale": "complete, stale (its dataset was rebuilt or removed)",
    UNFINISHED: f"{UNFINISHED} ({LEFT})",
}


def _file_cache(prefix: str, files: dict[str, os.stat_result]) -> Entry:
    lock = prefix + LOCK_SUFFIX
    record = lock_record(lock)
    complete = os.path.exists(prefix + INDEX_SUFFIX)
    # Whether a shard the cache was made from changed or is gone since it was written.
    stale = fingerprint.changed(record.get("shards") or ())
    spent = UNFINISHED if not complete else "stale" if stale else None
    held = holder(lock)
    if held:
        state = f"{'complete, in use' if complete else 'being written'} by {held}"
    else:
        state = _STATES[spent]
    return Entry(
        where=prefix,
        what=f"{record.get('dataset') or '?'} {record.get('split') or '?'}",
        size=sum(stat.st_size for stat in files.values()),
        last_used=max((stat.st_mtime for stat in files.values()), default=0.0),
        state=state,
        holder=held,
        spent=spent,
        # Its files, the lock file last, while holding it: a process that opens the cache
        # meanwhile finds it held and reads without it.
        remove=functools.partial(remove_unless_locked, lock, [f for f in files if f != lock]),
    )
