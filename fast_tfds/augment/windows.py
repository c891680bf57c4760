"""Each example's crop window, flip and colour factors, from (seed, epoch, example) alone.

The randomness is counter-based: every number is a hash of (seed, epoch, example
index, which draw), so it does not depend on the order examples are read in, on
threads or worker processes, or on what was drawn before. A resumed run, another
back end, or the same example read from a cache instead of its JPEG gets the same
window. Everything is vectorized over a batch of example indices: the tf.data
reader calls it from one `tf.numpy_function` per batch, the Grain loader from its
batch function.

Windows are (top, left, height, width) in the pixels of the picture they are drawn
for, whose size the caller gives: the stored image, or the part of it a dataset's
hook keeps (Stanford Dogs' box). A cache that holds the picture at another
resolution scales the window (`fast_tfds.augment.kernels` does).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fast_tfds.augment import draws
from fast_tfds.augment.spec import Augment

TRIES = 10  # random-resized crop: tries before the central fallback (torchvision, TF)

# Which draw of an example each number is (its counter).
_AREA, _RATIO = 0, TRIES
_TOP, _LEFT, _FLIP = 2 * TRIES, 2 * TRIES + 1, 2 * TRIES + 2
_BRIGHTNESS, _CONTRAST, _SATURATION, _HUE = range(2 * TRIES + 3, 2 * TRIES + 7)
DRAWS = 2 * TRIES + 7

# The whole picture, resized; no randomness (what `augment=None` draws: a read through a
# cache without augment=).
NO_AUGMENT = Augment(crop=None, flip=False)


@dataclasses.dataclass(frozen=True)
class Draw:
    """What a batch's draws are made from: the recipe (None: `NO_AUGMENT`), the seed, the
    epoch and the examples' indices (every number a hash of (seed, epoch, example)). The
    windows, the serving step and the stronger recipes take it whole."""

    augment: Augment | None
    seed: int
    epoch: int
    indices: np.ndarray


@dataclasses.dataclass(frozen=True)
class Rectangles:
    """A rectangle per example: top, left, height, width, int64 arrays (the crop windows
    here, the erased boxes of `fast_tfds.augment.erasing`)."""

    top: np.ndarray
    left: np.ndarray
    height: np.ndarray
    width: np.ndarray

    def __len__(self) -> int:
        return len(self.top)

    def window(self, i: int) -> tuple[int, int, int, int]:
        """(top, left, height, width) of example i, as plain ints."""
        return (int(self.top[i]), int(self.left[i]), int(self.height[i]), int(self.width[i]))


@dataclasses.dataclass(frozen=True)
class Windows(Rectangles):
    """One batch's choices, each an array with one value per example.

    top, left, height, width: int64, the crop in the picture's pixels.
    flip: bool, mirror left-right. brightness, contrast, saturation: float32
    factors (1 = unchanged); hue: float32 shift in turns (0 = unchanged).
    """

    flip: np.ndarray
    brightness: np.ndarray
    contrast: np.ndarray
    saturation: np.ndarray
    hue: np.ndarray

    @property
    def jittered_mask(self) -> np.ndarray:
        """bool [n]: whose colours change."""
        return (
            (self.brightness != 1) | (self.contrast != 1) | (self.saturation != 1) | (self.hue != 0)
        )


def sample(draw: Draw, heights, widths, output_size: tuple[int, int] = (224, 224)) -> Windows:
    """The windows, flips and colour factors of examples `draw.indices` in `draw.epoch`.

    `heights`, `widths`: the size of each example's picture (what the window is cut
    from); `output_size` (height, width): only the center crop uses it, for its
    aspect ratio.
    """
    augment = draw.augment or NO_AUGMENT
    heights = np.asarray(heights, np.int64).reshape(-1)
    widths = np.asarray(widths, np.int64).reshape(-1)
    n, count = len(heights), len(np.asarray(draw.indices).reshape(-1))
    if len(widths) != n or count != n:
        raise ValueError(f"{count} indices, {n} heights, {len(widths)} widths")
    u = np.zeros((n, DRAWS))
    if augment.random:
        u = draws.uniforms(draw.seed, draw.epoch, draw.indices, DRAWS)
    if augment.crop == "random_resized":
        top, left, height, width = _random_resized(augment, u, heights, widths)
    elif augment.crop == "center":
        top, left, height, width = _center(augment.crop_fraction, heights, widths, output_size)
    else:
        top, left, height, width = np.zeros(n, np.int64), np.zeros(n, np.int64), heights, widths
    flip = u[:, _FLIP] < 0.5 if augment.flip else np.zeros(n, bool)
    return Windows(
        top=top,
        left=left,
        height=height,
        width=width,
        flip=flip,
        brightness=_factor(augment.brightness, u[:, _BRIGHTNESS]),
        contrast=_factor(augment.contrast, u[:, _CONTRAST]),
        saturation=_factor(augment.saturation, u[:, _SATURATION]),
        hue=((2 * u[:, _HUE] - 1) * augment.hue).astype(np.float32),
    )


def _factor(amount: float, u: np.ndarray) -> np.ndarray:
    """torchvision's ColorJitter factor: uniform in [max(0, 1 - amount), 1 + amount]."""
    if amount == 0:
        return np.ones(len(u), np.float32)
    low = max(0.0, 1.0 - amount)
    return (low + u * (1.0 + amount - low)).astype(np.float32)


def tried_sides(area, scale, ratio, u_scale, u_ratio) -> tuple[np.ndarray, np.ndarray]:
    """int64 (round(sqrt(a r)), round(sqrt(a / r))) of each try of a box whose area a is
    `area` times a uniform in `scale` and whose ratio r is log-uniform in `ratio`: the
    draw of torchvision's RandomResizedCrop (r: width / height) and of timm's
    RandomErasing (r: height / width)."""
    target = (scale[0] + u_scale * (scale[1] - scale[0])) * area
    log_low, log_high = np.log(ratio[0]), np.log(ratio[1])
    r = np.exp(log_low + u_ratio * (log_high - log_low))
    long = np.round(np.sqrt(target * r)).astype(np.int64)
    return long, np.round(np.sqrt(target / r)).astype(np.int64)


def first_fit(fits: np.ndarray, *tried: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row of `fits` (bool [n, tries]): whether any try fits, then each of `tried`
    ([n, tries]) at the first one that does (at try 0 where none does)."""
    rows, first = np.arange(len(fits)), np.argmax(fits, axis=1)
    return fits[rows, first], *(values[rows, first] for values in tried)


def _random_resized(augment: Augment, u, heights, widths):
    """torchvision's `RandomResizedCrop.get_params`, all tries of all examples at once."""
    area = (heights * widths).astype(np.float64)[:, None]
    u_area, u_ratio = u[:, _AREA : _AREA + TRIES], u[:, _RATIO : _RATIO + TRIES]
    w, h = tried_sides(area, augment.scale, augment.ratio, u_area, u_ratio)
    fits = (w > 0) & (h > 0) & (w <= widths[:, None]) & (h <= heights[:, None])
    found, h, w = first_fit(fits, h, w)
    # torch.randint(0, H - h + 1): a uniform integer position.
    top = np.floor(u[:, _TOP] * (heights - h + 1)).astype(np.int64)
    left = np.floor(u[:, _LEFT] * (widths - w + 1)).astype(np.int64)
    # The fallback: the whole picture, clamped to the allowed aspect ratios, centered.
    in_ratio = widths / heights
    fh, fw = heights.copy(), widths.copy()
    narrow = in_ratio < augment.ratio[0]
    wide = in_ratio > augment.ratio[1]
    fh[narrow] = np.maximum(1, np.round(widths[narrow] / augment.ratio[0])).astype(np.int64)
    fw[wide] = np.maximum(1, np.round(heights[wide] * augment.ratio[1])).astype(np.int64)
    ftop, fleft = (heights - fh) // 2, (widths - fw) // 2
    # Where no try fits, the fallback.
    top, left = np.where(found, top, ftop), np.where(found, left, fleft)
    return top, left, np.where(found, h, fh), np.where(found, w, fw)


def _center(fraction: float, heights, widths, output_size: tuple[int, int]):
    """The largest window of the output's aspect ratio, times `fraction`, centered."""
    out_height, out_width = output_size
    scale = np.minimum(heights / out_height, widths / out_width) * fraction
    h = np.clip(np.round(out_height * scale), 1, heights).astype(np.int64)
    w = np.clip(np.round(out_width * scale), 1, widths).astype(np.int64)
    # torchvision's center_crop: int(round((H - h) / 2)).
    top = np.round((heights - h) / 2).astype(np.int64)
    left = np.round((widths - w) / 2).astype(np.int64)
    return top, left, h, w
