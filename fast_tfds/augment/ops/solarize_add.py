"""SolarizeAdd: timm's `solarize_add(image, add, thresh=128)`, `add` added to every value
below 128, saturated at 255 (timm's RandAugment op set has it, torchvision's has not)."""

from __future__ import annotations

import functools

import cv2
import numpy as np

_LEVELS = np.arange(256)


@functools.lru_cache(maxsize=512)
def _table(add: int, threshold: int) -> np.ndarray:
    # Made once per argument: building it per picture cost as much as using it.
    lut = np.where(_LEVELS < threshold, np.minimum(255, _LEVELS + add), _LEVELS)
    return lut.astype(np.uint8)


def apply(image: np.ndarray, add: float, threshold: int = 128) -> None:
    """In place; `add` is an integer in timm (its level mapped to 0..110)."""
    cv2.LUT(image, _table(int(add), threshold), dst=image)
