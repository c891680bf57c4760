"""Crop window + flip + the geometric ops of a recipe -> one affine map per picture.

A recipe crops a window, resizes it to the output frame, may flip it, then applies
geometric ops (rotate, shear, translate) in the output frame, filling what comes from
outside the frame. Every step is affine, so an output pixel's source in the cached
picture is one matrix away: the warp kernel (`fast_tfds.augment.warp`) cuts each
output with one `cv2.warpAffine`, without the intermediate pictures.

Coordinates are PIL's: continuous, pixel corners at integers (pixel (0, 0) covers
[0, 1) x [0, 1)), since the references' op matrices are written that way; `to_opencv`
converts to OpenCV's, where pixel centers are integers. Matrices are 3x3, inverse
maps: output -> input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_HALF = np.array([0.5, 0.5])


def per_example(scale, n: int) -> np.ndarray:
    """float64 [n]: a factor per example, from one per example, one for all, or None (1)."""
    return np.ones(n) if scale is None else np.broadcast_to(np.asarray(scale, np.float64), n)


def window_matrices(
    windows, output_size: tuple[int, int], scale_y=None, scale_x=None
) -> np.ndarray:
    """[n, 3, 3]: output frame pixel -> picture pixel, for the crop `windows` (a
    `windows.Windows`: top, left, height, width, in the pixels of the picture they were
    drawn for), flipped left-right where they flip, in a picture scaled by (scale_y,
    scale_x) from those pixels (a cache's resolution)."""
    out_h, out_w = output_size
    top, left = windows.top.astype(np.float64), windows.left.astype(np.float64)
    n = len(top)
    sy, sx = per_example(scale_y, n), per_example(scale_x, n)
    ky = windows.height.astype(np.float64) / out_h * sy
    kx = windows.width.astype(np.float64) / out_w * sx
    flip = np.asarray(windows.flip, bool)
    m = np.zeros((n, 3, 3))
    # x_source = (left + x * width / out_w) * sx; flipped: x -> out_w - x first.
    m[:, 0, 0] = np.where(flip, -kx, kx)
    m[:, 0, 2] = left * sx + np.where(flip, out_w * kx, 0.0)
    m[:, 1, 1] = ky
    m[:, 1, 2] = top * sy
    m[:, 2, 2] = 1.0
    return m


def chain(inverse_maps: Sequence[np.ndarray]) -> np.ndarray:
    """The inverse map of ops applied in order: for ops 1..n with inverse maps H_1..H_n,
    final(q) = original(H_1 @ ... @ H_n @ q)."""
    total = np.eye(3)
    for h in inverse_maps:
        total = total @ h
    return total


def to_opencv(matrix: np.ndarray) -> np.ndarray:
    """2x3 for `cv2.warpAffine` (pixel centers at integers) from a 3x3 in PIL's
    coordinates: q = A (p + 1/2) + t - 1/2 ([n, 2, 3] from [n, 3, 3])."""
    a, t = matrix[..., :2, :2], matrix[..., :2, 2]
    return np.concatenate([a, (t + a @ _HALF - _HALF)[..., None]], axis=-1)
