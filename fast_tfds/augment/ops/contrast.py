"""Contrast: PIL `ImageEnhance.Contrast(image).enhance(factor)`, the picture blended with
its mean grey level, rounded to an integer as PIL does (factor 0: flat grey)."""

from __future__ import annotations

import numpy as np

from fast_tfds.augment.ops import colour_map


def apply(image: np.ndarray, factor: float) -> None:
    """In place."""
    matrix = np.zeros((3, 4))
    matrix[:, :3] = np.eye(3) * factor
    matrix[:, 3] = (1 - factor) * colour_map.mean_grey(image)
    colour_map.transform(image, matrix)
