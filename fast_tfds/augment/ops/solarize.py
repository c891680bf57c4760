"""Solarize: PIL `ImageOps.solarize(image, threshold)`, every value at or above the
threshold inverted (threshold 256 or more: unchanged; 0: the negative)."""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np

_LEVELS = np.arange(256)


@functools.lru_cache(maxsize=512)
def _table(threshold: float) -> np.ndarray:
    # Made once per threshold (a policy's are a few bins'): building it per picture
    # cost as much as using it.
    return np.where(_LEVELS < threshold, _LEVELS, 255 - _LEVELS).astype(np.uint8)


def apply(image: np.ndarray, threshold: float) -> None:
    """In place."""
    if threshold > 255:
        return
    if image.flags.c_contiguous:
        # 255 - v is v XOR 255: the values at or above the threshold XORed with the
        # 255s of one vectorized compare, on the picture as one channel (a table
        # lookup is a scalar loop, about twice the time of the two passes).
        rows = image.reshape(image.shape[0], -1)
        cv2.bitwise_xor(rows, cv2.compare(rows, math.ceil(threshold), cv2.CMP_GE), dst=rows)
    else:
        cv2.LUT(image, _table(float(threshold)), dst=image)
