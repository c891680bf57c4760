"""The ops that map each value by itself: identity, invert, posterize, solarize and
solarize_add, in place on uint8 [h, w, 3] RGB.

Where a table would do it, a table is made once per argument (building it per picture
cost as much as using it); on a contiguous picture, viewed as one channel, a vectorized
OpenCV pass does it instead (a table lookup is a scalar loop).
"""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np

_LEVELS = np.arange(256)


def identity(image: np.ndarray, argument: float = 0.0) -> None:
    """Identity: the picture unchanged (torchvision's "Identity", a draw of the policies)."""


def invert(image: np.ndarray, argument: float = 0.0) -> None:
    """Invert: PIL `ImageOps.invert`, 255 - value (in timm's RandAugment op set, not in
    torchvision's RandAugment or TrivialAugmentWide). In place."""
    cv2.bitwise_not(image, dst=image)


@functools.cache
def _posterize_table(keep: int) -> np.ndarray:
    return np.arange(256, dtype=np.uint8) & np.uint8((0xFF << (8 - keep)) & 0xFF)


def posterize(image: np.ndarray, bits: float) -> None:
    """Posterize: PIL `ImageOps.posterize(image, bits)`, each value keeps its `bits` high
    bits (0 bits: black; 8: unchanged). In place; `bits` is truncated to an integer in
    0..8 (torchvision's int(magnitude))."""
    keep = min(8, max(0, int(bits)))
    if keep == 8:
        return
    if image.flags.c_contiguous:
        # The high bits kept by one vectorized AND on the picture as one channel (a
        # table lookup is a scalar loop, 4-5 times slower).
        rows = image.reshape(image.shape[0], -1)
        cv2.bitwise_and(rows, int(_posterize_table(keep)[255]), dst=rows)
    else:
        cv2.LUT(image, _posterize_table(keep), dst=image)


@functools.lru_cache(maxsize=512)
def _solarize_table(threshold: float) -> np.ndarray:
    # A policy's thresholds are a few bins'.
    return np.where(_LEVELS < threshold, _LEVELS, 255 - _LEVELS).astype(np.uint8)


def solarize(image: np.ndarray, threshold: float) -> None:
    """Solarize: PIL `ImageOps.solarize(image, threshold)`, every value at or above the
    threshold inverted (threshold 256 or more: unchanged; 0: the negative). In place."""
    if threshold > 255:
        return
    if image.flags.c_contiguous:
        # 255 - v is v XOR 255: the values at or above the threshold XORed with the
        # 255s of one vectorized compare, on the picture as one channel (a table
        # lookup is a scalar loop, about twice the time of the two passes).
        rows = image.reshape(image.shape[0], -1)
        cv2.bitwise_xor(rows, cv2.compare(rows, math.ceil(threshold), cv2.CMP_GE), dst=rows)
    else:
        cv2.LUT(image, _solarize_table(float(threshold)), dst=image)


@functools.lru_cache(maxsize=512)
def _solarize_add_table(add: int, threshold: int) -> np.ndarray:
    lut = np.where(_LEVELS < threshold, np.minimum(255, _LEVELS + add), _LEVELS)
    return lut.astype(np.uint8)


def solarize_add(image: np.ndarray, add: float, threshold: int = 128) -> None:
    """SolarizeAdd: timm's `solarize_add(image, add, thresh=128)`, `add` added to every
    value below 128, saturated at 255 (timm's RandAugment op set has it, torchvision's has
    not). In place; `add` is an integer in timm (its level mapped to 0..110)."""
    cv2.LUT(image, _solarize_add_table(int(add), threshold), dst=image)
