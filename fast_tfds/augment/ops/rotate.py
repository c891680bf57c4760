"""Rotate: PIL `image.rotate(degrees)` about the picture's center (w / 2, h / 2),
counter-clockwise for positive degrees, the size kept; what torchvision's `F.rotate`
and timm's `rotate` call for PIL pictures. The coefficients are PIL's own (cosines
and sines rounded to 15 digits), so the map is the reference's to the bit."""

from __future__ import annotations

import math

import numpy as np


def matrix(degrees: float, height: int, width: int) -> np.ndarray:
    """3x3: output pixel (x, y, 1), in pixel-corner coordinates, -> input pixel."""
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
