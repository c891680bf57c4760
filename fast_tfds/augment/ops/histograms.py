"""Per-channel histograms of a uint8 RGB picture, which autocontrast and equalize read."""

from __future__ import annotations

import cv2
import numpy as np


def of(image: np.ndarray) -> np.ndarray:
    """int64 [3, 256]: the count of each value in each channel (OpenCV's calcHist, which
    releases the GIL)."""
    return np.stack(
        [cv2.calcHist([image], [c], None, [256], [0, 256]).reshape(256) for c in range(3)]
    ).astype(np.int64)


def apply_luts(image: np.ndarray, luts: np.ndarray, planes=None) -> None:
    """image[..., c] <- luts[c][image[..., c]], in place: the channels split (or their
    `planes`, split already), each through its own table, merged back (OpenCV's LUT
    with a 3-channel table is a scalar loop, about twice the time of the three planes
    and their split and merge)."""
    tables = np.ascontiguousarray(luts, np.uint8)
    planes = cv2.split(image) if planes is None else planes
    for plane, table in zip(planes, tables, strict=True):
        cv2.LUT(plane, table, dst=plane)
    cv2.merge(planes, dst=image)
