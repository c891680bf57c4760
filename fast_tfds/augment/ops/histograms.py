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


def apply_luts(image: np.ndarray, luts: np.ndarray) -> None:
    """image[..., c] <- luts[c][image[..., c]], in place, one pass (cv2.LUT with a
    3-channel table)."""
    table = np.empty((256, 1, 3), np.uint8)
    table[:, 0, :] = luts.T
    cv2.LUT(image, table, dst=image)
