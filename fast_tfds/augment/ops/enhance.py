"""PIL's `ImageEnhance` ops: brightness, color, contrast and sharpness, in place on uint8
[h, w, 3] RGB.

`ImageEnhance` blends a picture with a "degenerate" one: black (brightness), its grey
levels (color), its mean grey level (contrast), its smoothed self (sharpness). The first
three blends are affine in RGB, so one `cv2.transform` pass of a 3x4 map does each,
saturating to 0..255 once (OpenCV releases the GIL). torchvision's policies pass factor =
1 + magnitude, timm's its level mapped to [0.1, 1.9].
"""

from __future__ import annotations

import cv2
import numpy as np

# PIL's `convert("L")` weights (ITU-R 601-2), which ImageEnhance's degenerates use.
GREY = np.array([0.299, 0.587, 0.114])
_SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13


def _transform(image: np.ndarray, linear: np.ndarray, offset: float = 0.0) -> None:
    """`image` (uint8 [h, w, 3]) <- linear @ rgb + offset, in place."""
    matrix = np.zeros((3, 4))
    matrix[:, :3] = linear
    matrix[:, 3] = offset
    cv2.transform(image, matrix, dst=image)


def mean_grey(image: np.ndarray) -> float:
    """PIL's `ImageStat.Stat(image.convert("L")).mean`, rounded as ImageEnhance.Contrast does."""
    return float(int(np.dot(cv2.mean(image)[:3], GREY) + 0.5))


def brightness(image: np.ndarray, factor: float) -> None:
    """Brightness: PIL `ImageEnhance.Brightness(image).enhance(factor)`, the pixels times
    factor; in place; factor 1: unchanged, 0: black."""
    _transform(image, np.eye(3) * factor)


def color(image: np.ndarray, factor: float) -> None:
    """Color (saturation): PIL `ImageEnhance.Color(image).enhance(factor)`, each pixel
    blended with its own grey level (factor 0: grey, 1: unchanged, above 1: more
    saturated). In place. PIL rounds the grey picture to uint8 before blending; one map
    rounds once."""
    _transform(image, factor * np.eye(3) + (1 - factor) * np.outer(np.ones(3), GREY))


def contrast(image: np.ndarray, factor: float) -> None:
    """Contrast: PIL `ImageEnhance.Contrast(image).enhance(factor)`, the picture blended
    with its mean grey level, rounded to an integer as PIL does (factor 0: flat grey).
    In place."""
    _transform(image, np.eye(3) * factor, (1 - factor) * mean_grey(image))


def sharpness(image: np.ndarray, factor: float) -> None:
    """Sharpness: PIL `ImageEnhance.Sharpness(image).enhance(factor)`, in place, on a
    picture of at least 3x3 (smaller ones are left unchanged, as PIL leaves them).

    The degenerate picture is PIL's SMOOTH filter (3x3, weights 1 and 5 in the middle,
    /13) with the outermost rows and columns left as they are (PIL's 3x3 filter copies
    them; torchvision's tensor version does the same on purpose); factor 0 gives the
    smoothed picture, 1 the picture, above 1 a sharpened one."""
    if factor == 1 or image.shape[0] < 3 or image.shape[1] < 3:
        return
    smooth = cv2.filter2D(image, -1, _SMOOTH, borderType=cv2.BORDER_REPLICATE)
    smooth[[0, -1]] = image[[0, -1]]
    smooth[:, [0, -1]] = image[:, [0, -1]]
    # factor * image + (1 - factor) * smooth, saturated once (addWeighted computes in float).
    cv2.addWeighted(image, factor, smooth, 1 - factor, 0, dst=image)
