"""TranslateY: the content moved down by `pixels` (torchvision's
`F.affine(translate=[0, pixels])`, inverse map y - pixels; timm's is the opposite sign,
see translate_x)."""

from __future__ import annotations

import numpy as np


def matrix(pixels: float, height: int, width: int) -> np.ndarray:
    """3x3: output pixel (x, y, 1), in pixel-corner coordinates, -> input pixel."""
    return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -pixels], [0.0, 0.0, 1.0]])
