"""ShearX: the inverse map (1, factor, 0, 0, 1, 0) about the top-left corner.

That is timm's `img.transform(AFFINE, (1, factor, 0, 0, 1, 0))` and torchvision's
`F.affine(shear=[degrees(atan(factor)), 0], center=[0, 0])` (whose inverse matrix
works out to the same coefficients). Geometric ops are not pixel ops: each gives a
matrix, and the warp kernel folds them with the crop and the flip into one warp.
"""

from __future__ import annotations

import numpy as np


def matrix(factor: float, height: int, width: int) -> np.ndarray:
    """3x3: output pixel (x, y, 1), in pixel-corner coordinates as PIL's, -> input pixel."""
    return np.array([[1.0, factor, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
