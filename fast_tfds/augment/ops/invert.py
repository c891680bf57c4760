"""Invert: PIL `ImageOps.invert`, 255 - value (in timm's RandAugment op set, not in
torchvision's RandAugment or TrivialAugmentWide)."""

from __future__ import annotations

import cv2
import numpy as np


def apply(image: np.ndarray, argument: float = 0.0) -> None:
    """In place."""
    cv2.bitwise_not(image, dst=image)
