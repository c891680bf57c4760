"""Where an arena's rows live: in memory when they fit the budget, else in a file on disk.

An arena larger than the memory the process may still take does not fail: the
kernel evicts the process's own pages (TensorFlow's code among them) to make
room, and the read crawls without an error. So before reserving the rows the
reader asks `fast_tfds.cache.memory_budget` how much it may take (the cgroup
limits of a container, MemAvailable, or the user's `cache_budget`), and when the
rows do not fit, lays them out in a memory-mapped file on local disk instead
(`fast_tfds.cache.disk_rows`): the same layout, the same fill and serve, with
the page cache keeping in memory as much of it as the budget allows. When the
disk lacks room too, the read fails before its first batch, with one line that
says what would fit.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from absl import logging

from fast_tfds.cache import disk_rows, memory, memory_budget

# Of the memory found free, the share an arena may take by default: the rest of the
# process (TensorFlow, prefetched batches, the model's own step) needs room too.
# A budget the user gives (`cache_budget=`) is taken whole.
DEFAULT_SHARE = 0.75


def fits_in_memory(need: int, cache_budget: int | None = None) -> bool:
    """Whether `need` bytes of rows fit the memory budget (as `allocator` decides)."""
    return need <= _allowed(cache_budget)[0]


def _allowed(cache_budget: int | None) -> tuple[int, memory_budget.MemoryBudget]:
    """The bytes a cache may take, and the budget they are a share of."""
    budget = memory_budget.available_memory(cache_budget)
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
        # Written back once, after the fill: served epochs then find clean pages,
        # which the kernel drops cheaply when the budget is reached.
        for array in arrays.values():
            disk_rows.write_back(array)
