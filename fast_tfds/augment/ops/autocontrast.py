"""AutoContrast: PIL `ImageOps.autocontrast(image)` (cutoff 0), each channel stretched so
that its darkest value becomes 0 and its brightest 255; a flat channel is left as it is.

PIL's table is int(value * scale + offset), truncated, with scale = 255 / (hi - lo) and
offset = -lo * scale: the same table is built here, so the op is exact.
"""

from __future__ import annotations

import cv2
import numpy as np

from fast_tfds.augment.ops import histograms

_LEVELS = np.arange(256, dtype=np.float64)


def luts(histogram: np.ndarray) -> np.ndarray:
    """[3, 256] tables for a [3, 256] histogram."""
    present = histogram > 0
    low = np.argmax(present, axis=1)
    high = 255 - np.argmax(present[:, ::-1], axis=1)
    return _tables(low, high)


def _tables(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[3, 256] tables for each channel's darkest and brightest values (the three
    channels at once: a loop of numpy calls per channel cost more than the tables' use)."""
    low, high = np.asarray(low)[:, None], np.asarray(high)[:, None]
    stretched = high > low
    scale = 255.0 / np.where(stretched, high - low, 1)
    tables = np.clip((_LEVELS * scale - low * scale).astype(np.int64), 0, 255)
    return np.where(stretched, tables, np.arange(256))


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """In place. Only each channel's range is needed, not its histogram: the channels
    split, their extremes (cv2.minMaxLoc, vectorized), each through its table, merged."""
    planes = cv2.split(image)
    ranges = np.array([cv2.minMaxLoc(plane)[:2] for plane in planes], np.int64)
    histograms.apply_luts(image, _tables(ranges[:, 0], ranges[:, 1]), planes)
