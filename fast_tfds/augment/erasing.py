"""Random erasing as timm's `RandomErasing(probability, mode="pixel")`, on uint8 outputs.

Per picture, from (seed, epoch, example) (`draws.ERASE`): with `probability`, up to 10
tries of a box whose area is uniform in [MIN_AREA, MAX_AREA] of the picture's (0.02 -
1/3) and whose aspect (height / width, as timm's) is log-uniform in [MIN_ASPECT,
1 / MIN_ASPECT] (0.3 - 3.3); h = round(sqrt(area * aspect)), w = round(sqrt(area /
aspect)); the first that fits strictly inside (h < H, w < W) is placed at a uniform
position (top in 0 .. H - h inclusive, as Python's randint) and filled with per-pixel
random values; none fits: nothing is erased. One box (timm's max_count 1).

timm erases after normalization, with standard-normal values z per pixel and channel;
in uint8 terms a value is mean + std * z of that channel (ImageNet's: 255 * (0.485,
0.456, 0.406) and 255 * (0.229, 0.224, 0.225)), rounded and clipped to 0..255. The clip
is the only difference from timm's float values: about 3% of them fall outside
(|z| beyond about 2.1 at the channels' means) and land on 0 or 255.

The values are drawn once per process (`FIELD` pixels, from a fixed seed, the same in
every process and back end), and each box copies a run of consecutive ones, starting
at an offset drawn from its seed: one copy instead of drawing a normal value per
pixel and channel (about 7 ns each, more than the warp of the picture for a large
box). A box's pixels are independent draws of that distribution; two boxes share
values only where their runs overlap (for boxes of the average 17% of a 224-px
picture, under 1% of a box's pixels on average).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from fast_tfds.augment import draws
from fast_tfds.augment.windows import Rectangles, first_fit, tried_sides
from fast_tfds.core.options import check_number

MEAN = 255 * np.array([0.485, 0.456, 0.406])
STD = 255 * np.array([0.229, 0.224, 0.225])
# timm's box: 2 - 33% of the picture's area, aspect (height / width) 0.3 - 3.3.
MIN_AREA = 0.02
MAX_AREA = 1 / 3
MIN_ASPECT = 0.3
FIELD = 1 << 20  # pixels drawn once; a box takes a run of them
_FIELD_SEED = 0x5EED_E7A5E


@dataclasses.dataclass(frozen=True)
class Boxes(Rectangles):
    """int64 [n] each: top, left, height, width; height 0 where nothing is erased.
    seeds: int64 [n], below 2**31, each box's pixel values' seed (where its run of
    `field()` starts)."""

    seeds: np.ndarray


def sample(probability: float, seed: int, epoch: int, indices, output_size) -> Boxes:
    """Each example's box in an output of `output_size` (height, width)."""
    check_number("erase", probability, lambda v: 0 <= v <= 1, "a number in [0, 1]")
    height, width = output_size
    u = draws.block(seed, epoch, indices, draws.ERASE, draws.ERASE_DRAWS)
    n, tries = len(u), draws.ERASE_TRIES
    tried = u[:, 1 : 1 + 4 * tries].reshape(n, tries, 4)
    aspects = (MIN_ASPECT, 1 / MIN_ASPECT)
    h, w = tried_sides(height * width, (MIN_AREA, MAX_AREA), aspects, tried[..., 0], tried[..., 1])
    found, h, w, u_top, u_left = first_fit(
        (h < height) & (w < width), h, w, tried[..., 2], tried[..., 3]
    )
    found &= u[:, 0] <= probability  # timm: skip if random() > p
    top = np.floor(u_top * (height - h + 1)).astype(np.int64)
    left = np.floor(u_left * (width - w + 1)).astype(np.int64)
    seeds = (u[:, -1] * 2.0**31).astype(np.int64)
    # No box: all four 0 (height 0 is what `erase_into` skips).
    top, left, h, w = (np.where(found, v, 0) for v in (top, left, h, w))
    return Boxes(top=top, left=left, height=h, width=w, seeds=seeds)


@functools.cache
def field() -> np.ndarray:
    """uint8 [FIELD, 3]: the values boxes copy, drawn on first use (read-only; threads that
    ask first at once may each draw it, the same values, and one is kept)."""
    z = np.random.Generator(np.random.PCG64(_FIELD_SEED)).standard_normal((FIELD, 3))
    values = np.clip(np.rint(MEAN + STD * z), 0, 255).astype(np.uint8)
    values.setflags(write=False)
    return values


def erase_into(out: np.ndarray, boxes: Boxes, i: int) -> None:
    """Fills example i's box of its picture `out` ([H, W, 3] uint8) with its random
    pixels: the run of `field()` at the offset its seed gives (one copy)."""
    top, left, h, w = boxes.window(i)
    if h == 0:
        return
    values = field()
    start = int(boxes.seeds[i]) % (len(values) - h * w + 1)
    np.copyto(out[top : top + h, left : left + w], values[start : start + h * w].reshape(h, w, 3))
