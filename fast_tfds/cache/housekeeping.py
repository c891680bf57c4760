"""Every cache on disk, of every kind, as `fast-tfds cache list|clean` sees it: one entry
type (`Entry`), one way to find a kind's entries in a folder (`find`), and one rule for
what `clean` removes (`why_remove`).

Three kinds of caches have files on disk, each described by the module that knows its
files: the file caches of `cache=PATH` (`tf_file_listing.FILE_CACHES`), the rows of a
memory cache larger than the memory budget (`disk_rows.ROWS`), and the persistent caches
of `persist=True` (`persistent_listing.PERSISTENT`). A cache that a running process holds
is never removed (its OS lock says so). Plain files, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable

# Who holds a cache whose lock names no process: a process maps it, or fills it.
RUNNING = "a running process"
# Why a cache can never be served again, when a process that is gone left it.
UNFINISHED = "unfinished"
LEFT = "left by a stopped run"


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


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def age_text(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


def parse_age(text: str) -> float:
    """'30d', '12h', '45m', '90s' or a number of days -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise ValueError(f"{text!r}: not an age (e.g. 30d, 12h, 45m, 90s)")
    return float(match.group(1)) * units[match.group(2) or "d"]
