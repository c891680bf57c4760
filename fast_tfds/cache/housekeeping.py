"""Every cache on disk, of every kind, as `fast-tfds cache list|clean` sees it: one entry
type (`Entry`), one way to find a kind's entries in a folder (`find`), and one rule for
what `clean` removes (`why_remove`).

Three kinds of caches have files on disk, each described by the module that knows its
files: the file caches of `cache=PATH` (`tf_file_listing.FILE_CACHES`), the rows of a
memory cache larger than the memory budget (`disk_rows.ROWS`), and the persistent caches
of `persist=True` (`persistent_format.PERSISTENT`). A cache that a running process holds
is never removed (its OS lock says so). Plain files, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

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


def is_locked(path: str | os.PathLike, *, readers_too: bool = False) -> bool:
    """Whether a live process holds `flock` on `path` (the lock goes with its holder): an
    exclusive lock, or with `readers_too` a shared one as well."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Gone, or not ours to read: nothing we could clean up anyway.
        return False
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if readers_too else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


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
