"""What `fast-tfds cache list|clean` shows and removes: the state of each cache on disk,
why one may be removed, and where the memory caches' disk rows are looked for.

Plain files, no TensorFlow: the file caches are found by `tf_file_listing`, the
memory caches' rows on disk by `disk_rows`, the persistent arenas (`persist=True`) by
`persistent`. A cache a running process holds is never removable (its OS lock says so).
"""

from __future__ import annotations

import time
from pathlib import Path

from fast_tfds.cache import disk_rows
from fast_tfds.cache.persistent_listing import TEMP_MARK, PersistentFile

ARENA_IN_USE = "in use by a running process"
ARENA_LEFT = "left by a stopped run"
# What a memory-cache file holds, in the column where a file cache names its dataset.
ARENA_WHAT = "rows of a memory cache (cache=True)"


def describe_state(cache) -> str:
    if cache.holder:
        state = "complete, in use" if cache.complete else "being written"
        return f"{state} by {cache.holder}"
    if not cache.complete:
        return "unfinished (left by a stopped run)"
    if cache.stale:
        return "complete, stale (its dataset was rebuilt or removed)"
    return "complete"


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def age_text(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


def arena_folders(folder: str | None) -> list[Path]:
    """Where `list` and `clean` look for memory-cache files: DIR, and without DIR (the
    current folder) also the default folder, where the reader puts them unless told."""
    here = Path(folder or ".")
    if folder is not None:
        return [here]
    default = disk_rows.default_folder()
    if default.is_dir() and default.resolve() == here.resolve():
        return [here]
    return [here, default]


def mtime_age_text(path: Path) -> str:
    try:
        return age_text(max(0.0, time.time() - path.stat().st_mtime))
    except OSError:  # Removed meanwhile.
        return "?"


def why_remove(cache, *, older_than_s: float | None, everything: bool) -> str | None:
    """Why `clean` removes this cache, or None to keep it."""
    if cache.holder:
        return None
    if not cache.complete:
        return "unfinished"
    if cache.stale:
        return "stale"
    return _asked(cache.age_s, older_than_s, everything)


def describe_persistent(found: PersistentFile) -> str:
    """The state of a persistent cache: in use, complete, stale, damaged or unfinished
    (every persistent cache, plain or augmented, is one kind of file)."""
    if TEMP_MARK in found.path.name:
        return f"persistent, {found.problem}"
    state = "persistent, in use" if found.in_use else "persistent"
    if found.problem:
        return f"{state}, damaged ({found.problem})"
    if found.stale:
        return f"{state}, stale (its dataset was rebuilt or removed)"
    return state


def why_remove_persistent(
    found: PersistentFile, *, older_than_s: float | None, everything: bool
) -> str | None:
    """Why `clean` removes a persistent arena, or None to keep it (always, when in use)."""
    if found.in_use:
        return None
    if TEMP_MARK in found.path.name:
        return "unfinished"
    if found.problem:
        return "damaged"
    if found.stale:
        return "stale"
    return _asked(found.age_s, older_than_s, everything)


def _asked(age_s: float, older_than_s: float | None, everything: bool) -> str | None:
    """Why `clean --all` or `--older-than` removes a cache that is complete and current."""
    if everything:
        return "--all"
    if older_than_s is not None and age_s > older_than_s:
        return f"not used for {age_text(age_s).removesuffix(' ago')}"
    return None
