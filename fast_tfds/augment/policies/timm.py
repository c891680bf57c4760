"""timm's RandAugment (`timm.data.auto_augment.rand_augment_transform`), from its config
string, e.g. "rand-m9-mstd0.5-inc1" (timm's documented ImageNet recipes) or "rand-m7-n2".

Sections after "rand", separated by "-", as timm reads them:
  m<int>: magnitude, on timm's 0-10 scale (level / 10 scales each op's range); default 10.
  n<int>: ops per picture, chosen uniformly with replacement; default 2.
  mstd<float>: each op's magnitude drawn from a gaussian around m with this spread
    (above 100: uniform in [0, m]); then clipped to [0, mmax].
  mmax<int>: the clip's upper end; default 10.
  inc<any>: the ops whose severity increases with the magnitude (timm tests the section's
    text for being non-empty, so "inc0" selects them too, as in timm).
  p<float>: each chosen op runs with this probability; default 0.5.

The op set (15): autocontrast, equalize, invert, rotate, posterize, solarize,
solarize_add, color, contrast, brightness, sharpness, shear x/y, translate x/y (relative),
with level l = magnitude / 10:

| op | argument | "inc" variant |
|---|---|---|
| rotate | +-30 l degrees | |
| shear x/y | factor +-0.3 l | |
| translate x/y | +-0.45 l of the width (height) | |
| posterize | int(4 l) bits (0 bits: black) | 4 - int(4 l) |
| solarize | threshold int(256 l) | 256 - int(256 l) |
| solarize_add | add int(110 l) below 128 | |
| color, contrast, brightness, sharpness | factor 1.8 l + 0.1 | max(0.1, 1 +- 0.9 l) |

Signs are coin flips. The fill is timm's training pipeline's: `img_mean`, the ImageNet
mean in uint8, (124, 116, 104) (timm's op default, used when no mean is passed, is
grey 128). timm picks bilinear or bicubic at random per op; here bilinear.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from fast_tfds.augment.ops import ENHANCE
from fast_tfds.augment.policies.drawn import Drawn, check_num_ops, choose_ops
from fast_tfds.core.options import check_number

LEVEL_DENOM = 10.0  # timm's _LEVEL_DENOM: magnitude 10 is each op's full range
IMAGENET_MEAN_FILL = (124, 116, 104)  # round(255 * (0.485, 0.456, 0.406))

OPS = (
    "autocontrast",
    "equalize",
    "invert",
    "rotate",
    "posterize",
    "solarize",
    "solarize_add",
    "color",
    "contrast",
    "brightness",
    "sharpness",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
)
# A config string's numeric sections: the field each sets and how its text reads ("inc"
# is read apart: any text turns it on).
_SECTIONS = {
    "mstd": ("magnitude_std", lambda text: math.inf if float(text) > 100 else float(text)),
    "mmax": ("magnitude_max", lambda text: float(int(text))),
    "m": ("magnitude", lambda text: float(int(text))),
    "n": ("num_ops", int),
    "p": ("prob", float),
}


@dataclasses.dataclass(frozen=True)
class RandAugment:
    """timm's RandAugment; `parse` reads its config string (see the module's docstring)."""

    magnitude: float = 10.0
    num_ops: int = 2
    magnitude_std: float = 0.0
    magnitude_max: float = LEVEL_DENOM
    increasing: bool = False
    prob: float = 0.5
    fill: tuple[int, int, int] = IMAGENET_MEAN_FILL

    def __post_init__(self) -> None:
        check_num_ops(self.num_ops)
        check_number("prob", self.prob, lambda v: 0 <= v <= 1, "in [0, 1]")
        check_number("magnitude_std", self.magnitude_std, lambda v: v >= 0, ">= 0")

    @classmethod
    def parse(cls, config: str) -> RandAugment:
        """timm's `rand_augment_transform(config_str)`'s reading of its string."""
        sections = config.split("-")
        if sections[0] != "rand":
            raise ValueError(f"auto_augment={config!r}: a timm config string starts with 'rand-'")
        fields: dict = {}
        for section in sections[1:]:
            parts = re.split(r"(\d.*)", section)
            if len(parts) < 2:  # timm skips a section without a number
                continue
            key, value = parts[:2]
            if key == "inc":
                fields["increasing"] = fields.get("increasing", False) or bool(value)
                continue
            if key not in _SECTIONS:
                raise ValueError(
                    f"auto_augment={config!r}: unknown section {section!r}: sections must "
                    "be m, n, mstd, mmax, inc or p (timm's RandAugment's)"
                )
            field, read = _SECTIONS[key]
            try:
                fields[field] = read(value)
            except ValueError:
                raise ValueError(
                    f"auto_augment={config!r}: section {section!r} must be a number"
                ) from None
        return cls(**fields)

    def draw(self, seed: int, epoch: int, indices, output_size: tuple[int, int]) -> Drawn:
        u, op = choose_ops(seed, epoch, indices, self.num_ops, len(OPS))
        magnitude = np.full(op.shape, self.magnitude)
        if self.magnitude_std == math.inf:
            magnitude = u[..., 1] * self.magnitude  # random.uniform(0, m)
        elif self.magnitude_std > 0:
            # random.gauss(m, std), by Box-Muller from the slot's two magnitude columns.
            normal = np.sqrt(-2 * np.log1p(-u[..., 1])) * np.cos(2 * np.pi * u[..., 2])
            magnitude = self.magnitude + self.magnitude_std * normal
        magnitude = np.clip(magnitude, 0.0, self.magnitude_max or LEVEL_DENOM)
        negate = u[..., 3] > 0.5  # timm's _randomly_negate: random() > 0.5
        applied = ~(u[..., 4] > self.prob) if self.prob < 1 else np.ones(op.shape, bool)
        args = self._arguments(op, magnitude / LEVEL_DENOM, negate, output_size)
        return Drawn(OPS, op, magnitude, args, applied)

    def _arguments(self, op, level, negate, output_size) -> np.ndarray:
        height, width = output_size
        sign = np.where(negate, -1.0, 1.0)
        args = np.zeros(op.shape)
        for i, name in enumerate(OPS):
            at = op == i
            lv, sg = level[at], sign[at]
            if name == "rotate":
                args[at] = 30.0 * lv * sg
            elif name in ("shear_x", "shear_y"):
                args[at] = 0.3 * lv * sg
            elif name in ("translate_x", "translate_y"):
                # timm's matrix moves the content by -pixels: negated for translate_x/y,
                # whose coin-flipped sign makes the distribution the same.
                size = width if name == "translate_x" else height
                args[at] = -(0.45 * lv * sg) * size
            elif name == "posterize":
                bits = np.trunc(lv * 4)
                args[at] = 4 - bits if self.increasing else bits
            elif name == "solarize":
                threshold = np.trunc(lv * 256)
                args[at] = 256 - threshold if self.increasing else threshold
            elif name == "solarize_add":
                args[at] = np.trunc(lv * 110)
            elif name in ENHANCE:
                if self.increasing:
                    args[at] = np.maximum(0.1, 1.0 + 0.9 * lv * sg)
                else:
                    args[at] = 1.8 * lv + 0.1
        return args
