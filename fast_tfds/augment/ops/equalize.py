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
    """[3, 256] tables for a [3, 256] histogram."""
    tables = np.tile(np.arange(256), (3, 1))
    for c, counts in enumerate(histogram):
        present = counts[counts > 0]
        if len(present) <= 1:
            continue
        step = (int(present.sum()) - int(present[-1])) // 255
        if step == 0:
            continue
        below = np.concatenate([[0], np.cumsum(counts)[:-1]])
        tables[c] = np.minimum(255, (step // 2 + below) // step)
    return tables


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """In place."""
    histograms.apply_luts(image, luts(histograms.of(image)))
