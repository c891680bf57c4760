"""AutoContrast: PIL `ImageOps.autocontrast(image)` (cutoff 0), each channel stretched so
that its darkest value becomes 0 and its brightest 255; a flat channel is left as it is.

PIL's table is int(value * scale + offset), truncated, with scale = 255 / (hi - lo) and
offset = -lo * scale: the same table is built here, so the op is exact.
"""

from __future__ import annotations

import numpy as np

from fast_tfds.augment.ops import histograms

_LEVELS = np.arange(256, dtype=np.float64)


def luts(histogram: np.ndarray) -> np.ndarray:
    """[3, 256] tables for a [3, 256] histogram."""
    tables = np.tile(np.arange(256), (3, 1))
    for c, counts in enumerate(histogram):
        present = np.flatnonzero(counts)
        low, high = present[0], present[-1]
        if high > low:
            scale = 255.0 / (high - low)
            tables[c] = np.clip((_LEVELS * scale - low * scale).astype(np.int64), 0, 255)
    return tables


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """In place."""
    histograms.apply_luts(image, luts(histograms.of(image)))
