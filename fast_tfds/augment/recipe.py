"""A stronger recipe applied to a batch: crop + flip (+ colour jitter) of an `Augment`,
a uniform rotation, an automatic-augmentation policy and random erasing, all drawn
from (seed, epoch, example), served by the warp kernel.

`apply_into` reads `Augment`'s fields (rotate=, auto_augment=, erase=); the serving
step (`fast_tfds.augment.step`) calls it for every batch cut from whole pictures, and a
recipe without any of them (not `Augment.strong`, or None) goes to the classic kernel,
`kernels.apply_into`.

The order is torchvision's and timm's: crop + resize, flip, colour jitter, rotation,
the policy's ops, erasing (timm erases last, after normalization).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from fast_tfds.augment import draws, erasing, kernels, warp, windows


def angles(rotate: float, seed: int, epoch: int, indices) -> np.ndarray:
    """float64 [n]: each example's rotation, uniform in [-rotate, rotate]."""
    u = draws.block(seed, epoch, indices, draws.ROTATE, 1)[:, 0]
    return (2 * u - 1) * rotate


def apply_into(
    pictures: Sequence[np.ndarray],
    draw: windows.Draw,
    out: np.ndarray,
    *,
    scale_y=None,
    scale_x=None,
    num_threads: int = 1,
    drawn: windows.Windows | None = None,
) -> np.ndarray:
    """Examples `draw.indices` of `draw.epoch` into `out` ([B, H, W, 3] uint8) from their
    decoded pictures, by `draw.augment`'s crop, flip and colour jitter, then its rotation,
    its policy (`Augment.policy`) and its erasing (without these, `kernels.apply_into`). drawn:
    the batch's windows, if the caller drew them already (default: drawn in the
    pictures' own sizes); scale_y, scale_x: from the sizes they were drawn for to the
    pictures' pixels, as in `kernels`."""
    augment, seed, epoch = draw.augment, draw.seed, draw.epoch
    indices = np.asarray(draw.indices).reshape(-1)
    size = out.shape[1:3]
    if drawn is None:
        heights = [p.shape[0] for p in pictures]
        widths = [p.shape[1] for p in pictures]
        drawn = windows.sample(draw, heights, widths, size)
    if augment is None or not augment.strong:
        return kernels.apply_into(
            pictures, drawn, out, scale_y=scale_y, scale_x=scale_x, num_threads=num_threads
        )
    steps: list[list[tuple]] = [[] for _ in range(len(indices))]
    if drawn.jittered_mask.any():
        jitter = kernels.Jitter(drawn)
        for i in np.flatnonzero(drawn.jittered_mask):
            steps[i].append((functools.partial(jitter.apply, int(i)), 0.0))
    if augment.rotate:
        for i, angle in enumerate(angles(augment.rotate, seed, epoch, indices).tolist()):
            steps[i].append(("rotate", angle))
    fill = (0, 0, 0)
    policy = augment.policy()
    if policy is not None:
        fill = policy.fill
        for i, ops in enumerate(policy.draw(seed, epoch, indices, size).recipes()):
            steps[i].extend(ops)
    boxes = erasing.sample(augment.erase, seed, epoch, indices, size) if augment.erase else None
    plan = warp.plan(
        pictures, drawn, steps, size, fill=fill, scale_y=scale_y, scale_x=scale_x, erase=boxes
    )
    return warp.apply_into(pictures, plan, out, num_threads=num_threads)
