"""The arena of examples: a split's examples, decoded elsewhere (by a transform, or the
tf.data service's workers), in one preallocated array per feature: the fallback's
cache for fixed-size examples (pictures decoded from the records go to the picture
store, `store`).

A split's size, and for fixed-size output each example's shape, are known before
reading, so the cache is laid out up front (`[N, 224, 224, 3]` uint8 for the images)
instead of growing one allocation per image as `Dataset.cache()` does. Epoch 1
writes each batch at its own rows; once every row is written, later epochs only
read. This module is the memory and its state, in numpy, without TensorFlow;
`fast_tfds.read.cached` wires it into tf.data.

Where the memory comes from is its backing (`memory.Backing`): anonymous memory by
default, rows on disk (a memory-mapped file of the same layout) for a cache larger
than the memory the process may use, or a persistent file.
"""

from __future__ import annotations

import ctypes
import dataclasses
import mmap
import sys
import threading
from collections.abc import Callable

import numpy as np

from fast_tfds.cache import store as stores
from fast_tfds.cache.memory import IN_MEMORY, Backing
from fast_tfds.cache.store import FILL, FILL_THEN_SERVE, SERVE  # noqa: F401  (the epoch modes)


@dataclasses.dataclass(frozen=True)
class Column:
    """One feature of the arena: the shape and dtype of one example's value."""

    shape: tuple[int, ...]
    dtype: np.dtype


class Arena:
    """One array per feature for `num_examples` examples, and whether it is filled.

    `begin()` is called once per epoch and says whether the epoch fills the arena or
    serves from it; `write()` puts a batch at its rows (each example at its own row,
    whatever order the fill runs in). A fill that stops early (an iterator dropped
    mid-epoch) leaves the arena unfilled, and the next epoch fills it again.
    """

    def __init__(
        self,
        num_examples: int,
        columns: dict[str, Column],
        backing: Backing = IN_MEMORY,
        *,
        filled: bool = False,
    ):
        """`filled`: the backing's rows are all written already (a persistent arena's
        file): the arena serves them from its first epoch and never fills."""
        self.num_examples = num_examples
        self.keys = sorted(columns)
        self.columns = {k: columns[k] for k in self.keys}
        self.backing = backing
        self.arrays = self._allocate()
        self.nbytes = sum(a.nbytes for a in self.arrays.values())
        self._lock = threading.Lock()
        self._filled = filled
        self._generation = 0  # Which fill pass may write; an abandoned one may not.
        self._written = 0
        self.key = _register(self)

    @property
    def filled(self) -> bool:
        return self._filled

    def begin(self, streamed: bool = True) -> np.ndarray:
        """[what this epoch does (FILL, SERVE or FILL_THEN_SERVE), fill generation].
        `streamed`: the epoch's order is the order its records stream in, so a fill can
        serve it as it goes; else it is a permutation, served once the rows are all in."""
        with self._lock:
            if not self._filled:
                self._generation += 1
                self._written = 0
                if self._generation > 1:
                    # Batches of the stopped fill may still be held, sharing its
                    # rows (uint8 output is not copied): refill new memory.
                    self.arrays = self._allocate()
            mode = SERVE if self._filled else FILL if streamed else FILL_THEN_SERVE
            return np.array([mode, self._generation], np.int64)

    def write(self, generation, rows, *columns) -> np.int64:
        """Puts one batch of examples (one array per key, in `keys` order) at `rows` (one
        row per example, or the first of consecutive rows); returns 0 (a value the
        graph can depend on)."""
        rows = np.asarray(rows, np.int64)
        if rows.ndim == 0:
            rows = np.arange(int(rows), int(rows) + len(columns[0]), dtype=np.int64)
        n = len(rows)
        # Consecutive rows (an unshuffled fill) are one slice, written in place.
        start = int(rows[0]) if n else 0
        run = n == 0 or bool(np.array_equal(rows, np.arange(start, start + n)))
        with self._lock:
            live = int(generation) == self._generation and not self._filled
            arrays = self.arrays
        if not live:
            return np.int64(0)
        for key, column in zip(self.keys, columns, strict=True):
            if run:
                target = arrays[key][start : start + n]
                prefault(target)
                target[...] = column
            else:
                arrays[key][rows] = column
        with self._lock:
            done = False
            if int(generation) == self._generation:
                self._written += n
                self._filled = done = self._written == self.num_examples
        if done:
            self.backing.filled(arrays, self.replace_rows)
        return np.int64(0)

    def replace_rows(self, old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> bool:
        """Serves `new` (the same rows, elsewhere: the persistent file's mapping) instead
        of `old` from the next epoch on, if `old` are still the filled rows."""
        with self._lock:
            if self.arrays is not old or not self._filled:
                return False
            self.arrays = {k: new[k] for k in self.keys}
            return True

    @property
    def reads_ahead(self) -> bool:
        """Whether served epochs should ask for their rows ahead (rows on disk)."""
        return self.backing.reads_ahead

    def read_ahead(self, rows: np.ndarray) -> None:
        if self._filled:
            rows = np.asarray(rows, np.int64).ravel()
            for array in self.arrays.values():
                row_bytes = array.strides[0]
                self.backing.read_ahead(array, rows * row_bytes, np.full(len(rows), row_bytes))

    def _allocate(self) -> dict[str, np.ndarray]:
        wanted = {k: ((self.num_examples, *c.shape), c.dtype) for k, c in self.columns.items()}
        return self.backing.columns(wanted)


# -- the registry: the one of every cache (`store`) ---------------------------------


def _register(arena: Arena) -> int:
    return stores.register(arena)


def live_arenas() -> list[Arena]:
    """The arenas whose datasets are alive in this process."""
    return [cache for cache in stores.live_caches() if isinstance(cache, Arena)]


def bytes_held() -> int:
    """Bytes reserved by the arenas alive in this process (what their datasets hold)."""
    return sum(arena.nbytes for arena in live_arenas())


def begin(key: int, streamed: bool = True) -> np.ndarray:
    return stores.live(key).begin(streamed)


def read_ahead(key: int, rows: np.ndarray) -> np.int64:
    """`Arena.read_ahead` on the arena of `key`, if it is still alive."""
    arena = stores.find(key)
    if arena is not None:
        arena.read_ahead(rows)
    return np.int64(0)


def rows(key: int, feature: bytes) -> np.ndarray:
    """Every row of one feature (its name as TensorFlow passes strings: bytes)."""
    return stores.live(key).arrays[feature.decode()]


def write(key: int, generation, rows, *columns) -> np.int64:
    """`Arena.write` on the arena of `key`; nothing once its dataset is gone (an iterator
    that still runs has its batches all the same)."""
    arena = stores.find(key)
    return np.int64(0) if arena is None else arena.write(generation, rows, *columns)


# -- backing the rows before they are written ----------------------------------------


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None).madvise  # A refusal is ignored: see prefault.
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return madvise


MADVISE = _madvise()
_MADV_POPULATE_WRITE = 23  # Linux >= 5.14; older kernels answer EINVAL.


def prefault(rows: np.ndarray) -> None:
    """Backs the pages of `rows` with memory in one system call, right before the block
    is written there (by the thread that writes it, the GIL released).

    Otherwise each new 4 KiB page is a page fault of its own when the decoder first
    writes it (dozens per image); one MADV_POPULATE_WRITE per block does the same work
    without a trap per page, and the fill takes less CPU (docs/design.md). It runs in the writing
    thread, not ahead of it in another one, where it would compete with decoding for
    the cores. Where the call is unavailable, the writes fault the pages in as before.
    """
    if MADVISE is None or rows.nbytes == 0:
        return
    start = rows.ctypes.data
    aligned = start - start % mmap.PAGESIZE
    MADVISE(aligned, start + rows.nbytes - aligned, _MADV_POPULATE_WRITE)
