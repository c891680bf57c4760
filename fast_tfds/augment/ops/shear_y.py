"""ShearY: the inverse map (1, 0, 0, factor, 1, 0) about the top-left corner (timm's
`shear_y`; torchvision's `F.affine(shear=[0, degrees(atan(factor))], center=[0, 0])`)."""

from __future__ import annotations

import numpy as np


def matrix(factor: float, height: int, width: int) -> np.ndarray:
    """3x3: output pixel (x, y, 1), in pixel-corner coordinates, -> input pixel."""
    return np.array([[1.0, 0.0, 0.0], [factor, 1.0, 0.0], [0.0, 0.0, 1.0]])
