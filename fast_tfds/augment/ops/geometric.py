"""The geometric ops: each gives the 3x3 inverse map of the output frame (output pixel
(x, y, 1), in pixel-corner coordinates as PIL's, -> input pixel) and touches no pixel;
the warp kernel folds them with the crop and the flip into one warp.
"""

from __future__ import annotations

import math

import numpy as np


def shear_x(factor: float, height: int, width: int) -> np.ndarray:
    """ShearX: the inverse map (1, factor, 0, 0, 1, 0) about the top-left corner.

    That is timm's `img.transform(AFFINE, (1, factor, 0, 0, 1, 0))` and torchvision's
    `F.affine(shear=[degrees(atan(factor)), 0], center=[0, 0])` (whose inverse matrix
    works out to the same coefficients)."""
    return np.array([[1.0, factor, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def shear_y(factor: float, height: int, width: int) -> np.ndarray:
    """ShearY: the inverse map (1, 0, 0, factor, 1, 0) about the top-left corner (timm's
    `shear_y`; torchvision's `F.affine(shear=[0, degrees(atan(factor))], center=[0, 0])`)."""
    return np.array([[1.0, 0.0, 0.0], [factor, 1.0, 0.0], [0.0, 0.0, 1.0]])


def translate_x(pixels: float, height: int, width: int) -> np.ndarray:
    """TranslateX: the content moved right by `pixels` (torchvision's
    `F.affine(translate=[pixels, 0])`, inverse map x - pixels). timm's `translate_x_*`
    moves it left by its argument: its policy passes the negated value (its sign is a coin
    flip, so the distribution is the same)."""
    return np.array([[1.0, 0.0, -pixels], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def translate_y(pixels: float, height: int, width: int) -> np.ndarray:
    """TranslateY: the content moved down by `pixels` (torchvision's
    `F.affine(translate=[0, pixels])`, inverse map y - pixels; timm's is the opposite sign,
    see translate_x)."""
    return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -pixels], [0.0, 0.0, 1.0]])


def rotate(degrees: float, height: int, width: int) -> np.ndarray:
    """Rotate: PIL `image.rotate(degrees)` about the picture's center (w / 2, h / 2),
    counter-clockwise for positive degrees, the size kept; what torchvision's `F.rotate`
    and timm's `rotate` call for PIL pictures. The coefficients are PIL's own (cosines
    and sines rounded to 15 digits), so the map is the reference's to the bit."""
    angle = -math.radians(degrees % 360.0)
    cos, sin = round(math.cos(angle), 15), round(math.sin(angle), 15)
    cx, cy = width / 2.0, height / 2.0
    return np.array(
        [
            [cos, sin, cx - cos * cx - sin * cy],
            [-sin, cos, cy + sin * cx - cos * cy],
            [0.0, 0.0, 1.0],
        ]
    )
