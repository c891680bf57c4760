"""Arrays whose data starts at a 64-byte boundary, for outputs handed to TensorFlow.

TensorFlow takes a `tf.numpy_function`'s output without a copy only when its data is
aligned for its widest vector loads (64 bytes in builds with AVX-512); otherwise it
copies every batch. numpy's large arrays start 16 bytes past a page (malloc's
header), so a batch made with `np.empty` is copied once more on its way out
(docs/design.md has what that costs). No TensorFlow here.
"""

from __future__ import annotations

import numpy as np

ALIGNMENT = 64


def empty(shape: tuple[int, ...], dtype=np.uint8) -> np.ndarray:
    """`np.empty(shape, dtype)` whose data starts at a multiple of `ALIGNMENT` bytes."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0:  # Holds no data: nothing to align.
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)
