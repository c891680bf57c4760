"""The ops that read each channel's histogram or range: autocontrast and equalize, in
place on uint8 [h, w, 3] RGB. Both are PIL's integer tables, built the same way here, so
both are exact.
"""

from __future__ import annotations

import cv2
import numpy as np

_LEVELS = np.arange(256, dtype=np.float64)


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


def _autocontrast_tables(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[3, 256] tables for each channel's darkest and brightest values (the three
    channels at once: a loop of numpy calls per channel cost more than the tables' use)."""
    low, high = np.asarray(low)[:, None], np.asarray(high)[:, None]
    stretched = high > low
    scale = 255.0 / np.where(stretched, high - low, 1)
    tables = np.clip((_LEVELS * scale - low * scale).astype(np.int64), 0, 255)
    return np.where(stretched, tables, np.arange(256))


def autocontrast(image: np.ndarray, argument: float = 0.0) -> None:
    """AutoContrast: PIL `ImageOps.autocontrast(image)` (cutoff 0), each channel stretched
    so that its darkest value becomes 0 and its brightest 255; a flat channel is left as
    it is. PIL's table is int(value * scale + offset), truncated, with scale = 255 / (hi -
    lo) and offset = -lo * scale: the same table is built here.

    In place. Only each channel's range is needed, not its histogram: the channels
    split, their extremes (cv2.minMaxLoc, vectorized), each through its table, merged."""
    planes = cv2.split(image)
    ranges = np.array([cv2.minMaxLoc(plane)[:2] for plane in planes], np.int64)
    apply_luts(image, _autocontrast_tables(ranges[:, 0], ranges[:, 1]), planes)


def equalize_luts(histogram: np.ndarray) -> np.ndarray:
    """[3, 256] tables for a [3, 256] histogram (the three channels at once).

    PIL's table per channel: with the histogram h and step = (sum of h - the count of the
    brightest present value) // 255, value i maps to (step // 2 + sum of h below i) //
    step; a channel with one value, or a step of 0, is left as it is."""
    histogram = np.asarray(histogram, np.int64)
    levels = np.arange(256)
    # The count of each channel's brightest present value.
    brightest = histogram[np.arange(3), 255 - np.argmax(histogram[:, ::-1] > 0, axis=1)]
    step = ((histogram.sum(axis=1) - brightest) // 255)[:, None]
    below = np.cumsum(histogram, axis=1) - histogram
    kept = ((histogram > 0).sum(axis=1)[:, None] <= 1) | (step == 0)
    tables = np.minimum(255, (step // 2 + below) // np.maximum(step, 1))
    return np.where(kept, levels, tables)


def equalize(image: np.ndarray, argument: float = 0.0) -> None:
    """Equalize: PIL `ImageOps.equalize(image)`, each channel's histogram flattened. In
    place."""
    apply_luts(image, equalize_luts(of(image)))
