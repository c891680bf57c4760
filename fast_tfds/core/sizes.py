"""Image sizes: the one default, the check of a requested size, and the size a split's
images come out at (the stored size, or the requested one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The output size when none is asked for: the size config '224' stores, so that the
# default read needs no resize.
DEFAULT_IMAGE_SIZE = 224


def is_int(value: Any) -> bool:
    """An int that is not a bool (True is an int to Python, never a size to us)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_image_size(image_size: Any) -> tuple[int, int] | None:
    """A positive int, a (height, width) pair or None; returned as `as_hw` gives it."""
    if image_size is None:
        return None
    ok_int = is_int(image_size) and image_size > 0
    ok_pair = (
        isinstance(image_size, (tuple, list))
        and len(image_size) == 2
        and all(is_int(v) and v > 0 for v in image_size)
    )
    if not (ok_int or ok_pair):
        raise ValueError(
            f"image_size={image_size!r}: must be a positive int, a (height, width) pair, or None"
        )
    return as_hw(image_size)


def as_hw(image_size: int | Sequence[int] | None) -> tuple[int, int] | None:
    """(height, width) of an int or pair image size; None stays None."""
    if image_size is None:
        return None
    if is_int(image_size):
        return (image_size, image_size)
    return tuple(image_size)


def stored_size(image_shape: Sequence[int | None]) -> tuple[int, int] | None:
    """(height, width) every stored image has (an Image feature's shape), or None if it varies."""
    height, width = image_shape[:2]
    return None if height is None or width is None else (height, width)


def output_size(stored: tuple[int, int] | None, requested: Any, *, dataset: str) -> tuple[int, int]:
    """The one (height, width) of every image of a batch: the requested size, else the
    stored one; an error when neither fixes it (the 'original' config keeps each
    image's own size)."""
    size = check_image_size(requested)
    if size is not None:
        return size
    if stored is None:
        raise ValueError(
            f"image_size=None: {dataset} keeps each image's own size; pass image_size= "
            "so that the images of a batch have one size"
        )
    return stored
