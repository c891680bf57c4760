"""Equalize: PIL `ImageOps.equalize(image)`, each channel's histogram flattened.

PIL's table per channel: with the histogram h and step = (sum of h - the count of the
brightest present value) // 255, value i maps to (step // 2 + sum of h below i) // step;
a channel with one value, or a step of 0, is left as it is. The same integer arithmetic
is done here, so the op is exact.
"""

from __future__ import annotations

import numpy as np

from fast_tfds.augment.ops import histograms


def luts(histogram: np.ndarray) -> np.ndarray:
    """[3, 256] tables for a [3, 256] histogram (the three channels at once)."""
    histogram = np.asarray(histogram, np.int64)
    levels = np.arange(256)
    # The count of each channel's brightest present value.
    brightest = histogram[np.arange(3), 255 - np.argmax(histogram[:, ::-1] > 0, axis=1)]
    step = ((histogram.sum(axis=1) - brightest) // 255)[:, None]
    below = np.cumsum(histogram, axis=1) - histogram
    kept = ((histogram > 0).sum(axis=1)[:, None] <= 1) | (step == 0)
    tables = np.minimum(255, (step // 2 + below) // np.maximum(step, 1))
    return np.where(kept, levels, tables)


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """In place."""
    histograms.apply_luts(image, luts(histograms.of(image)))
