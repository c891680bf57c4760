"""Where a cache's rows live: in memory when they fit the budget, else in a file on disk.

An arena larger than the memory the process may still take does not fail: the
kernel evicts the process's own pages (TensorFlow's code among them) to make
room, and the read crawls without an error. So before reserving the rows the
reader asks how much it may take (`available_memory`), and when the rows do not
fit, lays them out in a memory-mapped file on local disk instead
(`fast_tfds.cache.disk_rows`): the same layout, the same fill and serve, with
the page cache keeping in memory as much of it as the budget allows. When the
disk lacks room too, the read fails before its first batch, with one line that
says what would fit.

A container's limit is not the machine's memory: Docker, Kubernetes pods, Colab and
CI runners put the process in a cgroup whose memory limit is often far below what
/proc/meminfo shows. So the budget is the headroom of every cgroup the process is in
(v1 and v2, found through /proc/self/cgroup), and the machine's MemAvailable, whichever
is smaller; or the budget a user gave (`cache_budget`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
from absl import logging

from fast_tfds.cache import disk_rows, memory

# Of the memory found free, the share an arena may take by default: the rest of the
# process (TensorFlow, prefetched batches, the model's own step) needs room too.
# A budget the user gives (`cache_budget=`) is taken whole.
DEFAULT_SHARE = 0.75


def fits_in_memory(need: int, cache_budget: int | None = None) -> bool:
    """Whether `need` bytes of rows fit the memory budget (as `allocator` decides)."""
    return need <= _allowed(cache_budget)[0]


def _allowed(cache_budget: int | None) -> tuple[int, MemoryBudget]:
    """The bytes a cache may take, and the budget they are a share of."""
    budget = available_memory(cache_budget)
    return budget.bytes if cache_budget is not None else int(budget.bytes * DEFAULT_SHARE), budget


def allocator(
    need: int,
    *,
    what: str,
    cache_budget: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> memory.Backing:
    """Where the `need` bytes of a cache live: in memory or in files on disk.

    Raises `disk_rows.NotEnoughRoom` (a ValueError) with one line when neither
    memory nor the cache folder can hold it.
    """
    allowed, budget = _allowed(cache_budget)
    if need <= allowed:
        return memory.IN_MEMORY
    folder = Path(cache_dir) if cache_dir is not None else disk_rows.default_folder()
    over = f"the cache of {what} needs {memory.bytes_text(need)}, over its memory budget of "
    over += memory.bytes_text(allowed)
    try:
        disk_rows.check_room(folder, need)
    except (disk_rows.NotEnoughRoom, OSError) as err:
        raise disk_rows.NotEnoughRoom(
            f"fast_tfds: {over} ({budget.source}), and it cannot go to disk either: {err}. "
            "Pass cache_dir= a local folder with room, cache_budget= more bytes, a smaller "
            "image_size=, or cache=False."
        ) from None
    logging.warning(
        "fast_tfds: %s (%s): its rows go to a memory-mapped file in %s, served from the "
        "page cache as far as memory allows (set cache_dir= to choose the folder).",
        over,
        budget.source,
        folder,
    )
    return DiskRows(folder)


class DiskRows(memory.Backing):
    """Columns laid out in files in `folder`, one per column (objects stay in memory),
    which served epochs ask for ahead."""

    reads_ahead = True

    def __init__(self, folder: Path):
        self.folder = folder

    def columns(self, wanted: memory.Wanted) -> dict[str, np.ndarray]:
        return {
            name: memory.allocate_in_memory(shape, dtype)
            if np.dtype(dtype).hasobject
            else disk_rows.allocate(self.folder, shape, dtype)
            for name, (shape, dtype) in wanted.items()
        }

    def filled(self, arrays: dict[str, np.ndarray], replace: memory.Replace) -> None:
        """Writes every column's rows to its file now (msync), once filled, and reads them
        randomly from now on (`memory.read_randomly`).

        Under a memory limit the kernel must free page cache to make room; pages already
        written back are dropped at once, while dirty ones would be written out one by
        one inside that reclaim, stalling every reader that waits for memory. Served
        epochs then find clean pages, which the kernel drops cheaply when the budget is
        reached."""
        for array in arrays.values():
            region = memory.region_of(array)  # None: an object column, in memory.
            if region is not None:
                region.flush()
                memory.read_randomly(region)


# -- the memory budget ------------------------------------------------------------

# cgroup v1 writes "no limit" as a huge number near 2**63.
_V1_UNLIMITED = 1 << 60


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """Bytes this process may still take, and what said so (for the log and errors)."""

    bytes: int
    source: str


def available_memory(
    cache_budget: int | None = None,
    *,
    proc: str | os.PathLike = "/proc",
    cgroup_root: str | os.PathLike = "/sys/fs/cgroup",
) -> MemoryBudget:
    """The smallest of: `cache_budget` (if given), the cgroups' headroom, MemAvailable."""
    if cache_budget is not None:
        return MemoryBudget(int(cache_budget), f"cache_budget={cache_budget}")
    known = _least([_cgroup_headroom(Path(proc), Path(cgroup_root)), _mem_available(Path(proc))])
    # None: not Linux, or /proc is hidden: nothing to go by but trust.
    return known or MemoryBudget(1 << 62, "no limit found")


def _least(budgets: list[MemoryBudget | None]) -> MemoryBudget | None:
    """The smallest of the budgets found (the first of equals), or None."""
    return min(filter(None, budgets), key=lambda b: b.bytes, default=None)


def _mem_available(proc: Path) -> MemoryBudget | None:
    kib = _field(proc / "meminfo", "MemAvailable:")
    return None if kib is None else MemoryBudget(kib * 1024, "MemAvailable")


def _cgroup_headroom(proc: Path, root: Path) -> MemoryBudget | None:
    """The least headroom (limit - working set) over the process's cgroup and its parents."""
    found = []
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one unified hierarchy.
            found += [_level(level, *_V2) for level in _levels(root, path)]
        elif "memory" in controllers.split(","):
            found += [_level(level, *_V1) for level in _levels(root / "memory", path)]
    return _least(found)


def _levels(mount: Path, path: str) -> list[Path]:
    """The cgroup's folder and its parents up to the mount. Inside a container the
    path may name the host's hierarchy while the mount shows only the container's
    own cgroup: then the mount itself is the process's cgroup."""
    folder = mount / path.lstrip("/")
    if not folder.is_dir():
        folder = mount
    levels = [folder]
    while folder != mount and mount in folder.parents:
        folder = folder.parent
        levels.append(folder)
    return levels


# The files of a level's limit and usage, and the page cache the kernel drops first.
_V2 = ("memory.max", "memory.current", "inactive_file")
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")


def _level(folder: Path, limit_file: str, usage_file: str, inactive_key: str):
    """The headroom of one cgroup level (v1 or v2, by its files), or None: no limit."""
    limit = _read(folder / limit_file)
    if limit is None or limit == "max" or int(limit) >= _V1_UNLIMITED:
        return None
    # The working set, as kubelet counts it: usage less the page cache that the kernel
    # drops first.
    inactive = _field(folder / "memory.stat", inactive_key) or 0
    used = max(0, int(_read(folder / usage_file) or 0) - inactive)
    return MemoryBudget(max(0, int(limit) - used), f"the memory limit of cgroup {folder}")


def _field(path: Path, key: str) -> int | None:
    """The number after `key` in a file of "key value" lines (meminfo, memory.stat)."""
    for line in (_read(path) or "").splitlines():
        words = line.split()
        if words[:1] == [key]:
            return int(words[1])
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
