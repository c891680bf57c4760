"""Solarize: PIL `ImageOps.solarize(image, threshold)`, every value at or above the
threshold inverted (threshold 256 or more: unchanged; 0: the negative)."""

from __future__ import annotations

import cv2
import numpy as np

_LEVELS = np.arange(256)


def apply(image: np.ndarray, threshold: float) -> None:
    """In place."""
    if threshold > 255:
        return
    lut = np.where(_LEVELS < threshold, _LEVELS, 255 - _LEVELS).astype(np.uint8)
    cv2.LUT(image, lut, dst=image)
