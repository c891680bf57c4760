"""Posterize: PIL `ImageOps.posterize(image, bits)`, each value keeps its `bits` high bits
(0 bits: black; 8: unchanged)."""

from __future__ import annotations

import cv2
import numpy as np


def apply(image: np.ndarray, bits: float) -> None:
    """In place; `bits` is truncated to an integer in 0..8 (torchvision's int(magnitude))."""
    keep = min(8, max(0, int(bits)))
    if keep == 8:
        return
    lut = np.arange(256, dtype=np.uint8) & np.uint8((0xFF << (8 - keep)) & 0xFF)
    cv2.LUT(image, lut, dst=image)
