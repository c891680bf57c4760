"""Sharpness: PIL `ImageEnhance.Sharpness(image).enhance(factor)`.

The degenerate picture is PIL's SMOOTH filter (3x3, weights 1 and 5 in the middle, /13)
with the outermost rows and columns left as they are (PIL's 3x3 filter copies them;
torchvision's tensor version does the same on purpose); factor 0 gives the smoothed
picture, 1 the picture, above 1 a sharpened one.
"""

from __future__ import annotations

import cv2
import numpy as np

_SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13


def apply(image: np.ndarray, factor: float) -> None:
    """In place, on a picture of at least 3x3 (smaller ones are left unchanged, as PIL
    leaves them)."""
    if factor == 1 or image.shape[0] < 3 or image.shape[1] < 3:
        return
    smooth = cv2.filter2D(image, -1, _SMOOTH, borderType=cv2.BORDER_REPLICATE)
    smooth[0], smooth[-1], smooth[:, 0], smooth[:, -1] = (
        image[0],
        image[-1],
        image[:, 0],
        image[:, -1],
    )
    # factor * image + (1 - factor) * smooth, saturated once (addWeighted computes in float).
    cv2.addWeighted(image, factor, smooth, 1 - factor, 0, dst=image)
