"""Where a cache's memory comes from: one function (`Allocate`), anonymous memory by
default, so that rows on disk (a memory-mapped file of the same layout) or a persistent
file can take its place (see `placement` and `persisted`)."""

from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np

# fn(shape, dtype) -> a zero-initialised array of that shape, the memory behind a column.
# It may also have a method `filled(array)`, called once the fill has written every row,
# and `read_ahead(array, rows)`, called a few batches before served epochs gather those
# rows (rows on disk write themselves back, and are read ahead: see `placement`).
# An allocator of whole arenas (one file for every column: `persistent.FileFill`) has
# `columns({key: (shape, dtype)}) -> {key: array}` instead, and may have
# `complete(arrays, replace)`, called instead of `filled` once every row is written;
# `replace(old, new)` (`Arena.replace_rows`) may later swap in rows of the same content.
Allocate = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def allocate_in_memory(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A [*shape] array over an anonymous mapping of its own.

    Address space only: no memory is used until epoch 1 writes it, and the mapping is
    unmapped when the array (and every tensor that shares it) goes. Pages are the
    kernel's default size: transparent huge pages cut the page faults but made the
    fill slower (see docs/design.md).
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    region = mmap.mmap(
        -1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    )
    return np.frombuffer(region, dtype, count=count).reshape(shape)
