"""Identity: the picture unchanged (torchvision's "Identity", a draw of the policies)."""

from __future__ import annotations

import numpy as np


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """Leaves `image` as it is."""
