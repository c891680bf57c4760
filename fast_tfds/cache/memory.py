"""Where a cache's columns live: one interface (`Backing`) that every cache asks for its
memory and tells once it is filled, implemented by anonymous memory (`InMemory`), rows on
disk (`placement.DiskRows`) and the persistent file (`persisted.FileFill` while it is
filled, `persisted.ServedFile` once it is complete)."""

from __future__ import annotations

import abc
import contextlib
import ctypes
import mmap
import sys
from collections.abc import Callable

import numpy as np

# {column name: (shape, dtype)}: the arrays a cache asks its backing for.
Wanted = dict[str, tuple[tuple[int, ...], np.dtype]]
# replace(old, new) -> whether `old` (the arrays a backing gave) were still the ones served,
# and so are now `new` (the same rows, elsewhere: the persistent file's mapping).
Replace = Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], bool]


class Backing(abc.ABC):
    """The memory behind a cache's columns, and what happens to it once every row is
    written. A cache asks `columns` once, writes its rows, calls `filled` once they are all
    written, and while serving, if `reads_ahead`, asks the kernel for what it gathers next
    (`read_ahead_spans`).
    """

    # Whether served epochs should ask for their rows ahead (rows on disk).
    reads_ahead: bool = False

    @abc.abstractmethod
    def columns(self, wanted: Wanted) -> dict[str, np.ndarray]:
        """The arrays for `wanted` (zero-initialised, or the rows of a complete file)."""

    @abc.abstractmethod
    def filled(self, arrays: dict[str, np.ndarray], replace: Replace) -> None:
        """Every row of `arrays` (what `columns` gave) is written: rows on disk are
        written back, a persistent file is written out; `replace` may later be called to
        serve the same rows from elsewhere."""


class InMemory(Backing):
    """Anonymous memory: nothing to do once filled, nothing to read ahead."""

    def columns(self, wanted: Wanted) -> dict[str, np.ndarray]:
        return {name: allocate_in_memory(shape, dtype) for name, (shape, dtype) in wanted.items()}

    def filled(self, arrays: dict[str, np.ndarray], replace: Replace) -> None:
        pass


IN_MEMORY = InMemory()


def allocate_in_memory(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A [*shape] array over an anonymous mapping of its own (objects: a plain array).

    Address space only: no memory is used until epoch 1 writes it, and the mapping is
    unmapped when the array (and every tensor that shares it) goes. Pages are the
    kernel's default size: transparent huge pages cut the page faults but made the
    fill slower (see docs/design.md).
    """
    dtype = np.dtype(dtype)
    if dtype.hasobject:  # Values of any kind (the loader's targets) live in the heap.
        return np.empty(shape, dtype)
    count = int(np.prod(shape))
    region = mmap.mmap(
        -1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    )
    return np.frombuffer(region, dtype, count=count).reshape(shape)


def bytes_text(n: int) -> str:
    """`n` bytes in GiB, or MiB below one GiB, for log lines and errors."""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


# -- a column over a mapped file -----------------------------------------------------


def region_of(array: np.ndarray) -> mmap.mmap | None:
    """The mapping an array over a file views (rows on disk, or a persistent file's
    column), or None."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # What np.frombuffer keeps of the mapping.
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def read_randomly(region: mmap.mmap) -> None:
    """From now on rows are read in a random order: without this, each page fault reads
    the device's whole read-ahead window around it, which a memory limit then evicts
    before it is used (docs/design.md, "Where the cache lives"). `read_ahead_spans` asks
    for the rows instead."""
    if hasattr(mmap, "MADV_RANDOM"):
        region.madvise(mmap.MADV_RANDOM)


def read_ahead_spans(array: np.ndarray, starts, lengths) -> None:
    """Asks the kernel to start reading byte spans of a column of a mapped file (offsets
    into `array`, and lengths: one per span, or one for all): the rows, or the pictures,
    a served epoch gathers next.

    A served epoch gathers rows in a random order; those the page cache no longer
    holds would each be read when the gather faults on them, one at a time. Asked
    for a few batches ahead (MADV_WILLNEED), they are read in the background, many
    at once, while the batches before them are gathered. `array` may be any column
    of the mapping (a persistent file's columns lie at their own offsets).
    """
    region = region_of(array)
    if region is None or not hasattr(mmap, "MADV_WILLNEED"):
        return
    offset = array.ctypes.data - np.frombuffer(region, np.uint8, count=1).ctypes.data
    starts = np.asarray(starts, np.int64) + offset
    aligned = starts - starts % mmap.PAGESIZE  # madvise takes a page's address
    for start, length in zip(aligned.tolist(), (starts + lengths - aligned).tolist(), strict=True):
        region.madvise(mmap.MADV_WILLNEED, start, length)


# -- backing the rows before they are written ----------------------------------------


MADVISE: Callable[[int, int, int], int] | None = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):  # A refusal is ignored: see prefault.
        MADVISE = ctypes.CDLL(None).madvise
        MADVISE.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
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
