"""TranslateX: the content moved right by `pixels` (torchvision's
`F.affine(translate=[pixels, 0])`, inverse map x - pixels). timm's `translate_x_*`
moves it left by its argument: its policy passes the negated value (its sign is a coin
flip, so the distribution is the same)."""

from __future__ import annotations

import numpy as np


def matrix(pixels: float, height: int, width: int) -> np.ndarray:
    """3x3: output pixel (x, y, 1), in pixel-corner coordinates, -> input pixel."""
    return np.array([[1.0, 0.0, -pixels], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
