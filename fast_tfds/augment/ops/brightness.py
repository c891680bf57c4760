"""Brightness: PIL `ImageEnhance.Brightness(image).enhance(factor)`, the pixels times factor.

torchvision's policies pass factor = 1 + magnitude, timm's its level mapped to [0.1, 1.9].
"""

from __future__ import annotations

import numpy as np

from fast_tfds.augment.ops import colour_map


def apply(image: np.ndarray, factor: float) -> None:
    """In place; factor 1: unchanged, 0: black."""
    matrix = np.zeros((3, 4))
    matrix[:, :3] = np.eye(3) * factor
    colour_map.transform(image, matrix)
