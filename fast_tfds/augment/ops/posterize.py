"""Posterize: PIL `ImageOps.posterize(image, bits)`, each value keeps its `bits` high bits
(0 bits: black; 8: unchanged)."""

from __future__ import annotations

import functools

import cv2
import numpy as np


@functools.cache
def _table(keep: int) -> np.ndarray:
    # Made once per bit count: building it per picture cost as much as using it.
    return np.arange(256, dtype=np.uint8) & np.uint8((0xFF << (8 - keep)) & 0xFF)


def apply(image: np.ndarray, bits: float) -> None:
    """In place; `bits` is truncated to an integer in 0..8 (torchvision's int(magnitude))."""
    keep = min(8, max(0, int(bits)))
    if keep == 8:
        return
    if image.flags.c_contiguous:
        # The high bits kept by one vectorized AND on the picture as one channel (a
        # table lookup is a scalar loop, 4-5 times slower).
        rows = image.reshape(image.shape[0], -1)
        cv2.bitwise_and(rows, int(_table(keep)[255]), dst=rows)
    else:
        cv2.LUT(image, _table(keep), dst=image)
