"""torchvision's `TrivialAugmentWide` and `RandAugment` (torchvision.transforms.autoaugment).

Both use torchvision's op set of 14 (identity, shear x/y, translate x/y, rotate,
brightness, color, contrast, sharpness, posterize, solarize, autocontrast, equalize)
and a table of `num_magnitude_bins` (31) magnitudes per op, signed ops negated with
probability 1/2:

| op | TrivialAugmentWide: bin 0 .. 30 | RandAugment: bin 0 .. 30 |
|---|---|---|
| shear x/y | 0 .. 0.99 (the shear factor, tan of its angle) | 0 .. 0.3 |
| translate x/y | 0 .. 32 pixels | 0 .. 150/331 of the width (height) |
| rotate | 0 .. 135 degrees | 0 .. 30 degrees |
| brightness, color, contrast, sharpness | factor 1 + (0 .. 0.99) | 1 + (0 .. 0.9) |
| posterize | 8 - round(bin / 5) bits: 8 .. 2 | 8 - round(bin / 7.5): 8 .. 4 |
| solarize | threshold 255 .. 0 | 255 .. 0 |

TrivialAugmentWide applies one op per picture, with a uniform bin; RandAugment
`num_ops` ops (2; with replacement), each at the fixed bin `magnitude` (9 of 31:
e.g. 9 degrees of rotation, factor 1 +- 0.27). Translations are truncated to whole
pixels and posterize's bits to integers, as torchvision does. The fill is 0 (black),
torchvision's default; its interpolation default is NEAREST, here bilinear (one warp
also does the crop's resize, which nearest sampling would alias).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fast_tfds.augment.ops import ENHANCE, GEOMETRIC
from fast_tfds.augment.policies.drawn import Drawn, check_num_ops, choose_ops
from fast_tfds.core.options import check_number

# The order is torchvision's `_augmentation_space`: each op's index is what a draw picks.
OPS = ("identity", *GEOMETRIC, *ENHANCE, "posterize", "solarize", "autocontrast", "equalize")
_SIGNED = {*GEOMETRIC, *ENHANCE}


def tables(bins: int, output_size: tuple[int, int], wide: bool) -> np.ndarray:
    """float64 [len(OPS), bins]: each op's magnitude per bin (0 for ops without one)."""
    height, width = output_size
    i = np.arange(bins)
    table = np.zeros((len(OPS), bins))

    def row(name, values):
        table[OPS.index(name)] = values

    shear, rotate, enhance = (0.99, 135.0, 0.99) if wide else (0.3, 30.0, 0.9)
    row("shear_x", np.linspace(0, shear, bins))
    row("shear_y", np.linspace(0, shear, bins))
    row("translate_x", np.linspace(0, 32.0 if wide else 150 / 331 * width, bins))
    row("translate_y", np.linspace(0, 32.0 if wide else 150 / 331 * height, bins))
    row("rotate", np.linspace(0, rotate, bins))
    for name in ENHANCE:
        row(name, np.linspace(0, enhance, bins))
    # bins == 1 would divide by 0 in torchvision too; its tables need 2 bins or more.
    row("posterize", 8 - np.round(i / ((bins - 1) / (6 if wide else 4))))
    row("solarize", np.linspace(255.0, 0.0, bins))
    return table


def arguments(ops: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """The op modules' arguments for torchvision's (signed) magnitudes."""
    args = magnitude.copy()
    enhance = np.isin(ops, [OPS.index(n) for n in ENHANCE])
    args[enhance] = 1.0 + magnitude[enhance]
    whole = np.isin(ops, [OPS.index(n) for n in ("translate_x", "translate_y", "posterize")])
    args[whole] = np.trunc(magnitude[whole])  # torchvision's int(magnitude)
    return args


def _drawn(u: np.ndarray, ops: np.ndarray, magnitude: np.ndarray) -> Drawn:
    """The chosen `ops` at their table's `magnitude`, a signed op's negated where its sign
    column u[..., 3] is below one half; every op applied."""
    signed = np.isin(ops, [OPS.index(n) for n in _SIGNED])
    magnitude = magnitude * np.where(signed & (u[..., 3] < 0.5), -1.0, 1.0)
    return Drawn(OPS, ops, magnitude, arguments(ops, magnitude), np.ones(ops.shape, bool))


def _check_bins(num_magnitude_bins) -> int:
    check_number(
        "num_magnitude_bins", num_magnitude_bins, lambda v: v >= 2, "an integer >= 2", kind=int
    )
    return num_magnitude_bins


@dataclasses.dataclass(frozen=True)
class TrivialAugmentWide:
    """torchvision's TrivialAugmentWide: one op of 14 per picture, uniformly, at a
    uniform bin of `num_magnitude_bins` (see the module's table)."""

    num_magnitude_bins: int = 31
    fill: tuple[int, int, int] = (0, 0, 0)

    def __post_init__(self) -> None:
        _check_bins(self.num_magnitude_bins)

    def draw(self, seed: int, epoch: int, indices, output_size: tuple[int, int]) -> Drawn:
        u, op = choose_ops(seed, epoch, indices, 1, len(OPS))
        bins = self.num_magnitude_bins
        level = np.minimum(np.floor(u[..., 1] * bins), bins - 1).astype(np.int64)
        return _drawn(u, op, tables(bins, output_size, wide=True)[op, level])


@dataclasses.dataclass(frozen=True)
class RandAugment:
    """torchvision's RandAugment: `num_ops` ops of 14 per picture, uniformly with
    replacement, each at bin `magnitude` of `num_magnitude_bins`."""

    num_ops: int = 2
    magnitude: int = 9
    num_magnitude_bins: int = 31
    fill: tuple[int, int, int] = (0, 0, 0)

    def __post_init__(self) -> None:
        bins = _check_bins(self.num_magnitude_bins)
        check_num_ops(self.num_ops)
        must = f"an integer bin in [0, {bins - 1}] (num_magnitude_bins={bins})"
        check_number("magnitude", self.magnitude, lambda v: 0 <= v < bins, must, kind=int)

    def draw(self, seed: int, epoch: int, indices, output_size: tuple[int, int]) -> Drawn:
        u, op = choose_ops(seed, epoch, indices, self.num_ops, len(OPS))
        table = tables(self.num_magnitude_bins, output_size, wide=False)[:, self.magnitude]
        return _drawn(u, op, table[op])
