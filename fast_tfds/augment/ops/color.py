"""Color (saturation): PIL `ImageEnhance.Color(image).enhance(factor)`, each pixel blended
with its own grey level (factor 0: grey, 1: unchanged, above 1: more saturated)."""

from __future__ import annotations

import numpy as np

from fast_tfds.augment.ops import colour_map


def apply(image: np.ndarray, factor: float) -> None:
    """In place. PIL rounds the grey picture to uint8 before blending; one map rounds once."""
    matrix = np.zeros((3, 4))
    matrix[:, :3] = factor * np.eye(3) + (1 - factor) * np.outer(np.ones(3), colour_map.GREY)
    colour_map.transform(image, matrix)
