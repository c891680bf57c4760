"""The shared step of brightness, color and contrast: a 3x4 affine map of the RGB values.

PIL's `ImageEnhance` blends a picture with a "degenerate" one: black (brightness), its
grey levels (color), its mean grey level (contrast). Each blend is affine in RGB, so one
`cv2.transform` pass does it, saturating to 0..255 once (OpenCV releases the GIL).
"""

from __future__ import annotations

import cv2
import numpy as np

# PIL's `convert("L")` weights (ITU-R 601-2), which ImageEnhance's degenerates use.
GREY = np.array([0.299, 0.587, 0.114])


def transform(image: np.ndarray, matrix: np.ndarray) -> None:
    """`image` (uint8 [h, w, 3]) <- matrix[:, :3] @ rgb + matrix[:, 3], in place."""
    cv2.transform(image, matrix, dst=image)


def mean_grey(image: np.ndarray) -> float:
    """PIL's `ImageStat.Stat(image.convert("L")).mean`, rounded as ImageEnhance.Contrast does."""
    return float(int(np.dot(cv2.mean(image)[:3], GREY) + 0.5))
